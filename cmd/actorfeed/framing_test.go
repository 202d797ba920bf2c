package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// framingCases are a TFRecord file and a WebDataset shard of 50 samples
// each, written by gen, and copies of them whose framing is damaged at
// the sixth record or sample, as issue 59's attacks damaged it, by name.
func framingCases(t *testing.T, dir string) map[string]string {
	t.Helper()
	for _, to := range []string{"tfrecord", "wds"} {
		_, err := cli(t, "gen", "--out", filepath.Join(dir, to), "--to", to, "--files", "1", "--samples", "50", "--image-size", "8")
		require.NoError(t, err)
	}
	tf, err := os.ReadFile(filepath.Join(dir, "tfrecord", "shard-000000.tfrecord"))
	require.NoError(t, err)
	tar, err := os.ReadFile(filepath.Join(dir, "wds", "shard-000000.tar"))
	require.NoError(t, err)
	var rec []int // each record's offset
	for o := 0; o < len(tf); o += 16 + int(binary.LittleEndian.Uint64(tf[o:])) {
		rec = append(rec, o)
	}
	var hdr []int // each member's header
	for o := 0; o+512 <= len(tar) && tar[o] != 0; {
		hdr = append(hdr, o)
		size, err := strconv.ParseInt(strings.Trim(string(tar[o+124:o+136]), "\x00 "), 8, 64)
		require.NoError(t, err)
		o += 512 + int(size+511)/512*512
	}
	h := hdr[10] // the sixth sample's first member
	edit := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	sized := func(field []byte) func([]byte) { // a size field, the header's checksum kept right
		return func(c []byte) {
			copy(c[h+124:h+136], field)
			sum := 8 * int(' ')
			for i, b := range c[h : h+512] {
				if i < 148 || i >= 156 {
					sum += int(b)
				}
			}
			copy(c[h+148:h+156], fmt.Sprintf("%06o\x00 ", sum))
		}
	}
	files := map[string][]byte{
		"length-crc.tfrecord": edit(tf, func(c []byte) { c[rec[5]+9] ^= 0xff }),
		"length.tfrecord":     edit(tf, func(c []byte) { c[rec[5]] ^= 1 }),
		"checksum.tar":        edit(tar, func(c []byte) { c[h+148] ^= 1 }),
		"size-8gib.tar":       edit(tar, sized([]byte("77777777777\x00"))),
		"size-base256.tar":    edit(tar, sized(append([]byte{0x80}, binary.BigEndian.AppendUint64(make([]byte, 3), 10)...))),
		"size-negative.tar":   edit(tar, sized([]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))),
		"header-cut.tar":      tar[:h+300],
	}
	entries := map[string]string{}
	for name, b := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		if strings.HasSuffix(name, ".tar") {
			entries[name] = "wds:" + path
		} else {
			entries[name] = "tfrecord(image=bytes,label=int64):" + path
		}
	}
	return entries
}

// Damage to a file's framing (a TFRecord length or its checksum, a tar
// header's checksum, a size of 8 GiB, base-256 or negative, a header cut
// off) cannot be skipped by finding the next record: where it starts is
// unknown. Under --on-corrupt skip the records before the damage are read
// and the rest of the file listed as lost; under fail, the one line says
// so. In any order (no index), the reader meets the damage and ends the
// file there alike. Before, every case ended the job under skip too,
// advising the skip that had just failed.
func TestDamagedFramingUnderEachPolicy(t *testing.T) {
	dir := t.TempDir()
	for name, entry := range framingCases(t, dir) {
		_, err := cli(t, "run", "--data", entry, "--batch", "8")
		require.Error(t, err, name)
		msg := userMessage(err)
		require.Contains(t, msg, filepath.Join(dir, name), name)
		require.Contains(t, msg, "framing is damaged here, so where its next record starts cannot be found", name)
		require.Contains(t, msg, "--on-corrupt skip reads the records before it and lists the rest of the file as lost", name)
		require.NotContains(t, msg, "skip skips it", name)

		for _, order := range [][]string{nil, {"--any-order"}} { // by the file's index, or read to its end
			out, err := cli(t, append([]string{"run", "--data", entry, "--batch", "8", "--on-corrupt", "skip"}, order...)...)
			require.NoError(t, err, "%s %v", name, order)
			require.Regexp(t, `\n[45] samples in`, out, "%s %v", name, order)
			require.Contains(t, out, "the rest of 1 file(s) past damage to their framing", "%s %v", name, order)
		}
	}
}
