package wds_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/tensor"
)

// sparseShards are the shards of testdata/sparse: three samples of fields
// cls and txt, the second's txt a sparse file.
func sparseShards(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("testdata/sparse/*.tar")
	require.NoError(t, err)
	require.Len(t, paths, 4)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = b
	}
	return out
}

// sparseWant is what Python's tarfile reads from each: the second txt has
// its hole as zeros.
func sparseWant() [][2][]byte {
	return [][2][]byte{
		{[]byte("0"), []byte("hello1")},
		{[]byte("1"), append(make([]byte, 8192), "second sample data"...)},
		{[]byte("2"), []byte("third")},
	}
}

func requireSparseSamples(t *testing.T, name string, got []tensor.Slots) {
	t.Helper()
	want := sparseWant()
	require.Len(t, got, len(want), name)
	for i, s := range got {
		cls, err := tensor.View[int64](s[0].Tensor)
		require.NoError(t, err)
		require.Equal(t, []int64{int64(want[i][0][0] - '0')}, cls, "%s: sample %d's cls", name, i)
		require.True(t, bytes.Equal(want[i][1], s[1].Bytes()), "%s: sample %d's txt: %q", name, i, s[1].Bytes()[max(0, len(s[1].Bytes())-24):])
	}
}

// Sparse members (tar -S, in each of GNU tar's formats) are read as
// Python's tarfile reads them, their holes as zeros, by every path: the
// tar reader in order, the spans it or the scan gives read in order and
// by seeking. Before, the spans took the next header to lie past the
// member's logical size: sample 1's txt was raw header bytes, and the
// samples after it were someone else's (issue 59).
func TestSparseMembersReadAsTarfileReadsThem(t *testing.T) {
	for name, b := range sparseShards(t) {
		r := wds.NewReader(bytes.NewReader(b), name)
		_, all := readAll(t, r)
		requireSparseSamples(t, name+" (tar reader)", all)

		sp, err := wds.NewReader(bytes.NewReader(b), name).Spans()
		require.NoError(t, err)
		requireSparseSamples(t, name+" (tar reader's spans)", readSpans(t, b, sp))

		sp, err = wds.ScanSpans(bytes.NewReader(b), int64(len(b)), name)
		require.NoError(t, err)
		requireSparseSamples(t, name+" (scanned spans)", readSpans(t, b, sp))
		sr := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), name, sp)
		for _, i := range []int{2, 1, 0} {
			require.NoError(t, sr.Seek(i))
			s, err := sr.Next()
			require.NoError(t, err)
			require.Equal(t, sparseWant()[i][1], s[1].Bytes(), "%s: sample %d by seeking", name, i)
		}
	}
}

// readSpans reads every sample of b by sp.
func readSpans(t *testing.T, b []byte, sp *wds.Spans) []tensor.Slots {
	t.Helper()
	sr := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), "shard", sp)
	var all []tensor.Slots
	for {
		s, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return all
		}
		require.NoError(t, err)
		all = append(all, s)
	}
}

// A sparse member whose file is mostly hole (100 MB of it in a shard of a
// few KiB) is refused by name once it has expanded past
// MaxSparseExpansion times its bytes in the shard, having allocated a
// small part of its size; before, every such sample asked for its whole
// size, so that a batch of them asked for gigabytes.
func TestASparseBombIsRefusedByName(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "0.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(100<<20))
	_, err = f.WriteAt([]byte{1}, 100<<20-1)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0.cls"), []byte("3"), 0o644))
	shard := filepath.Join(t.TempDir(), "bomb.tar")
	out, err := exec.Command("tar", "-S", "--format=posix", "-cf", shard, "-C", dir, "0.bin", "0.cls").CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	require.Less(t, len(b), 64<<10, "a sparse shard: GNU tar wrote the hole as a hole")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = wds.NewReader(bytes.NewReader(b), "bomb.tar").Next()
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "member 0.bin")
	require.ErrorContains(t, err, "a sparse file of more than 64 times the bytes it takes in the shard")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "allocated to refuse it")
}
