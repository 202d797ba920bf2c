package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// inspect lists a WebDataset shard's members and samples, gzip'd too, and
// names a damaged sample and a damaged tar header.
func TestInspectWebDatasetShards(t *testing.T) {
	dir := t.TempDir()
	_, err := cli(t, "gen", "--to", "wds", "--out", dir, "--files", "2", "--samples", "20", "--image-size", "16")
	require.NoError(t, err)
	shard := filepath.Join(dir, "shard-000000.tar")
	out, err := cli(t, "inspect", shard)
	require.NoError(t, err)
	for _, want := range []string{"format:  wds, 26624 bytes\n", "members: 20 files", "samples: 10 whole, fields cls, jpg",
		"keys:    00000000 to 00000018\n", "verdict: every member read"} {
		require.Contains(t, out, want)
	}

	raw, err := os.ReadFile(shard)
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	zipped := filepath.Join(dir, "zipped.tar.gz")
	require.NoError(t, os.WriteFile(zipped, gz.Bytes(), 0o644))
	out, err = cli(t, "inspect", zipped)
	require.NoError(t, err)
	require.Contains(t, out, "gzip'd")
	require.Contains(t, out, "samples: 10 whole")

	// Sample 00000002's class is not a number: that sample is damaged, the
	// others are read.
	bad := bytes.Clone(raw)
	at := bytes.Index(bad, []byte("00000002.cls"))
	bad[at+512] = 'x'
	require.NoError(t, os.WriteFile(shard, bad, 0o644))
	out, err = cli(t, "inspect", shard)
	require.ErrorContains(t, err, "1 samples are damaged; the first: ")
	require.ErrorContains(t, err, shard)
	require.ErrorContains(t, err, "00000002")
	require.Contains(t, out, "samples: 9 whole")
	require.Contains(t, out, "damaged: ")

	// The third member's header fails its checksum: nothing from there on
	// is read, and neither is the first sample, whose end the reader finds
	// only by reading the next header.
	bad = bytes.Clone(raw)
	bad[2560+148] ^= 0x01
	require.NoError(t, os.WriteFile(shard, bad, 0o644))
	out, err = cli(t, "inspect", shard)
	require.ErrorContains(t, err, "1 samples are damaged; the first: ")
	require.ErrorContains(t, err, "offset 2560")
	require.Contains(t, out, "members: 2 files")
	require.Contains(t, out, "samples: 0 whole\n")
}

// inspect checks both CRCs of every TFRecord record and parses its
// Example: a record whose data fails its CRC is named and the rest read;
// a length that fails its CRC ends the file there.
func TestInspectTFRecordFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := cli(t, "gen", "--to", "tfrecord", "--out", dir, "--files", "1", "--samples", "20", "--image-size", "16")
	require.NoError(t, err)
	file := filepath.Join(dir, "shard-000000.tfrecord")
	out, err := cli(t, "inspect", file)
	require.NoError(t, err)
	for _, want := range []string{"records:  20 whole", "features: image=bytes,label=int64\n", "verdict:  every record's length and data CRC-32C match"} {
		require.Contains(t, out, want)
	}
	out, err = cli(t, "inspect", "tfrecord(label=int64):"+file)
	require.NoError(t, err)
	require.Contains(t, out, "features: label=int64\n")

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	offsets := []int{0} // where each record starts: an 8-byte length, its CRC, the data, its CRC
	for at := 0; at < len(raw); {
		at += 16 + int(binary.LittleEndian.Uint64(raw[at:]))
		offsets = append(offsets, at)
	}
	bad := bytes.Clone(raw)
	bad[offsets[3]+12+5] ^= 0xff // record 3's data
	require.NoError(t, os.WriteFile(file, bad, 0o644))
	out, err = cli(t, "inspect", file)
	require.ErrorContains(t, err, "1 records are damaged; the first: ")
	require.ErrorContains(t, err, "record 3")
	require.Contains(t, out, "records:  19 whole")

	bad = bytes.Clone(raw)
	bad[offsets[5]] ^= 0x01 // record 5's length
	require.NoError(t, os.WriteFile(file, bad, 0o644))
	out, err = cli(t, "inspect", file)
	require.ErrorContains(t, err, "record 5")
	require.Contains(t, out, "records:  5 whole")
}
