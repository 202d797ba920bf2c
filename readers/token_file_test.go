package readers_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// OpenTokens reads an llm.c token file from its source as Open reads the
// file: the same samples, positions restarting at the entry's eot; a
// source that fails is an error naming the file, and another format is
// refused.
func TestOpenTokensReadsAnLLMCFileFromItsSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.bin")
	toks := []uint16{50256, 1, 2, 3, 50256, 4, 5, 6, 7, 8, 50256, 9, 10}
	file := make([]byte, 1024, 1024+2*len(toks))
	binary.LittleEndian.PutUint32(file, 20240520)
	binary.LittleEndian.PutUint32(file[4:], 1)
	binary.LittleEndian.PutUint32(file[8:], uint32(len(toks)))
	for _, v := range toks {
		file = binary.LittleEndian.AppendUint16(file, v)
	}
	require.NoError(t, os.WriteFile(path, file, 0o644))
	entry := "llmc(seq_len=4,eot=50256):" + path
	want := samplesOf(t, must(t, func() (readers.Reader, error) { return readers.Open(entry, readers.OpenOptions{}) }))
	require.Len(t, want, 3)
	var asked []string
	got := samplesOf(t, must(t, func() (readers.Reader, error) {
		return readers.OpenTokens(entry, func(p string) (readers.Source, error) {
			asked = append(asked, p)
			return bytesSource{io.NewSectionReader(bytes.NewReader(file), 0, int64(len(file)))}, nil
		})
	}))
	require.Equal(t, []string{path}, asked)
	require.Equal(t, want, got)
	require.Equal(t, []int64{0, 1, 2, 3, 0}, got[0][1], "positions restart at eot")

	_, err := readers.OpenTokens(entry, func(p string) (readers.Source, error) {
		return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EIO}
	})
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorContains(t, err, path)
	_, err = readers.OpenTokens("x.recordio", nil)
	require.ErrorIs(t, err, readers.ErrUnknownFormat)
}

// must is what open returns, failing the test on its error; the reader
// is closed when the test ends.
func must(t *testing.T, open func() (readers.Reader, error)) readers.Reader {
	t.Helper()
	r, err := open()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// samplesOf reads r to its end: each sample's slots as int64s.
func samplesOf(t *testing.T, r readers.Reader) [][][]int64 {
	t.Helper()
	var out [][][]int64
	for {
		s, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		var slots [][]int64
		for _, slot := range s {
			v, err := tensor.View[int64](slot.Tensor)
			require.NoError(t, err)
			slots = append(slots, append([]int64(nil), v...))
		}
		out = append(out, slots)
	}
}
