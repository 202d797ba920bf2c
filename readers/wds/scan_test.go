package wds_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/wds"
)

// sameSpans requires a and b to locate the same samples and fields.
func sameSpans(t testing.TB, want, got *wds.Spans) {
	t.Helper()
	wb, err := want.MarshalBinary()
	require.NoError(t, err)
	gb, err := got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, wb, gb, "tar's spans %v, the scan's %v", want.Starts(), got.Starts())
}

// writtenShards are n samples as Python's tarfile (pax headers for every
// member), GNU tar and Go's archive/tar (ustar prefixes for long names)
// write them. Every seventh sample's jpg is large, so that a scan passes
// over its data rather than reading it.
func writtenShards(t testing.TB, n int) map[string][]byte {
	src, dir := t.TempDir(), t.TempDir()
	for i := range n {
		key := filepath.Join(src, fmt.Sprintf("%06d", i))
		size := 10 + i*97
		if i%7 == 3 {
			size = 70_000 + i
		}
		require.NoError(t, os.WriteFile(key+".jpg", bytes.Repeat([]byte{byte(i)}, size), 0o644))
		require.NoError(t, os.WriteFile(key+".cls", []byte(fmt.Sprint(i%10)), 0o644))
	}
	py, gnu := filepath.Join(dir, "py.tar"), filepath.Join(dir, "gnu.tar")
	testutil.PythonShard(t, src, py)
	testutil.GNUShard(t, src, gnu)
	out := map[string][]byte{
		"go":      shard(t, samples(n, false)...),
		"go long": shard(t, samples(n, true)...),
	}
	for name, path := range map[string]string{"python": py, "gnu": gnu} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		out[name] = b
	}
	return out
}

// The shards people write are scanned, not left to archive/tar, and the
// scan locates what tar does.
func TestScanReadsTheShardsPeopleWrite(t *testing.T) {
	for name, b := range writtenShards(t, 40) {
		got, err := wds.ScanOnly(b)
		require.NoError(t, err, name)
		require.Positive(t, got.Len(), name)
		sameSpans(t, spansOf(t, b), got)
		via, err := wds.ScanSpans(bytes.NewReader(b), int64(len(b)), name)
		require.NoError(t, err, name)
		sameSpans(t, got, via)
	}
}

// What the scan leaves to tar is read by tar: its spans where it reads the
// shard, its error naming the member where it does not.
func TestScanLeavesTheRestToTar(t *testing.T) {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: "a.cls", Size: 1, Typeflag: tar.TypeReg, Format: tar.FormatGNU,
		Uid: 1 << 30, Gid: 1 << 30})) // base-256 ids
	_, err := w.Write([]byte("1"))
	require.NoError(t, err)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: strings.Repeat("x", 120) + ".cls", Size: 1, Typeflag: tar.TypeReg,
		Format: tar.FormatGNU})) // a GNU long name
	_, err = w.Write([]byte("2"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = wds.ScanOnly(b.Bytes())
	require.ErrorIs(t, err, wds.ErrIrregular)
	sp, err := wds.ScanSpans(bytes.NewReader(b.Bytes()), int64(b.Len()), "odd.tar")
	require.NoError(t, err)
	sameSpans(t, spansOf(t, b.Bytes()), sp)
	require.Equal(t, 2, sp.Len())

	bad := shard(t, samples(3, false)...)
	bad[sp.Starts()[0]+1024+100] ^= 0x40 // the second member's header: its checksum fails
	_, err = wds.ScanSpans(bytes.NewReader(bad), int64(len(bad)), "bad.tar")
	_, werr := wds.NewReader(bytes.NewReader(bad), "bad.tar").Spans()
	require.Error(t, werr)
	require.EqualError(t, err, werr.Error())
}

// trimmed is a shard without the zero blocks after its end marker: tar
// writers pad to 10 KiB.
func trimmed(b []byte) []byte {
	end := len(bytes.TrimRight(b, "\x00"))
	return b[:min(len(b), (end+511)/512*512+1024)]
}

// Wherever the scan locates samples, archive/tar reads the shard and
// locates the same; elsewhere ScanSpans is tar's answer. With fix 1 or 2,
// every block that is not zero gets a right checksum, of its bytes
// unsigned or signed, so that mutated headers reach both parsers.
func FuzzScanSpans(f *testing.F) {
	for _, b := range writtenShards(f, 2) {
		f.Add(trimmed(b), uint8(0)) // small: the fuzzer minimises what it finds, a minute each
		f.Add(trimmed(b), uint8(1))
		f.Add(trimmed(b), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, fix uint8) {
		if fix%3 != 0 {
			fixChecksums(b, fix%3 == 2)
		}
		want, werr := wds.NewReader(bytes.NewReader(b), "fuzz.tar").Spans()
		if got, err := wds.ScanOnly(b); err == nil {
			require.NoError(t, werr, "the scan reads a shard tar refuses")
			sameSpans(t, want, got)
		}
		got, err := wds.ScanSpans(bytes.NewReader(b), int64(len(b)), "fuzz.tar")
		if werr != nil {
			require.EqualError(t, err, werr.Error())
			return
		}
		require.NoError(t, err)
		sameSpans(t, want, got)
	})
}

// fixChecksums gives every block of b that is not zero the checksum of a
// header, of its bytes as signed or unsigned.
func fixChecksums(b []byte, signed bool) {
	for off := 0; off+512 <= len(b); off += 512 {
		blk := b[off : off+512]
		if len(bytes.TrimLeft(blk, "\x00")) == 0 {
			continue
		}
		copy(blk[148:156], "        ")
		sum := 0
		for _, c := range blk {
			if signed {
				sum += int(int8(c))
			} else {
				sum += int(c)
			}
		}
		if sum < 0 {
			continue // tar's field holds no negative sum
		}
		copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
}

// BenchmarkScanSpans locates the samples of a shard of small members (a
// 580-byte png and a cls, as Fashion-MNIST converted) by the scan and
// through archive/tar.
func BenchmarkScanSpans(b *testing.B) {
	var files []file
	for i := range 12_000 {
		key := fmt.Sprintf("%06d", i)
		files = append(files, file{key + ".cls", []byte(fmt.Sprint(i % 10))}, file{key + ".png", make([]byte, 580)})
	}
	data := shard(b, files...)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := wds.ScanSpans(bytes.NewReader(data), int64(len(data)), "b.tar"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tar", func(b *testing.B) {
		for b.Loop() {
			if _, err := wds.NewReader(bytes.NewReader(data), "b.tar").Spans(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A directory whose header gives a size has no data, as tar reads it: the
// next sample starts right after the header, and reads by the spans.
func TestAHeaderOnlyMemberHasNoData(t *testing.T) {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}))
	for i := range 2 {
		for _, ext := range []string{"cls", "txt"} {
			require.NoError(t, w.WriteHeader(&tar.Header{Name: fmt.Sprintf("d/s%d.%s", i, ext), Size: 1, Typeflag: tar.TypeReg}))
			_, err := w.Write([]byte("1"))
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.Close())
	x := b.Bytes()
	copy(x[124:136], "00000002000\x00") // the directory says 1024 bytes
	fixChecksums(x[:512], false)
	scanned, err := wds.ScanSpans(bytes.NewReader(x), int64(len(x)), "d.tar")
	require.NoError(t, err)
	for _, sp := range []*wds.Spans{spansOf(t, x), scanned} {
		require.Equal(t, []int64{512, 2560}, sp.Starts())
		r := wds.NewSpanReader(bytes.NewReader(x), int64(len(x)), "d.tar", sp)
		for range 2 {
			s, err := r.Next()
			require.NoError(t, err)
			require.Len(t, s, 2)
		}
	}
}
