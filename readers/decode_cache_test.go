package readers_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
)

// writeMNIST writes n images of 2x2 bytes (image i all i+salt) and their
// labels (i % 10) under MNIST's names in dir, gzip'd, and returns the
// images file's path.
func writeMNIST(t *testing.T, dir string, n int, salt byte) string {
	t.Helper()
	images := []byte{0, 0, 8, 3}
	images = binary.BigEndian.AppendUint32(images, uint32(n))
	images = binary.BigEndian.AppendUint32(images, 2)
	images = binary.BigEndian.AppendUint32(images, 2)
	labels := binary.BigEndian.AppendUint32([]byte{0, 0, 8, 1}, uint32(n))
	for i := range n {
		images = append(images, bytes.Repeat([]byte{byte(i) + salt}, 4)...)
		labels = append(labels, byte(i%10))
	}
	path := filepath.Join(dir, "train-images-idx3-ubyte.gz")
	for p, data := range map[string][]byte{path: images, filepath.Join(dir, "train-labels-idx1-ubyte.gz"): labels} {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.NoError(t, os.WriteFile(p, z.Bytes(), 0o644))
	}
	return path
}

// readFrom opens path, seeks to sample n and reads the rest: each sample's
// image byte and label.
func readFrom(t *testing.T, path string, n int) (images, labels []byte, count uint64, counted bool) {
	t.Helper()
	r, err := readers.Open("idx:"+path, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	count, counted = countOf(r)
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(n))
	for {
		s, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return images, labels, count, counted
		}
		require.NoError(t, err)
		images, labels = append(images, s[0].Bytes()[0]), append(labels, s[1].Bytes()[0])
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A gzip'd IDX pair is decoded once into the cache, in which readers seek
// and which gives their count; a changed file gets a copy of its own; with
// the cache off, or a copy gone, the stream is read forward, with the same
// samples.
func TestGzipIDXSeeksInItsDecodedCopy(t *testing.T) {
	cache, data := filepath.Join(t.TempDir(), "cache"), t.TempDir()
	t.Setenv(readers.DecodeCacheEnv, cache)
	path := writeMNIST(t, data, 3000, 0)
	want := func(from int, salt byte) ([]byte, []byte) {
		var im, lb []byte
		for i := from; i < 3000; i++ {
			im, lb = append(im, byte(i)+salt), append(lb, byte(i%10))
		}
		return im, lb
	}

	im, lb, n, counted := readFrom(t, path, 2500)
	wantIm, wantLb := want(2500, 0)
	require.Equal(t, wantIm, im)
	require.Equal(t, wantLb, lb)
	require.True(t, counted)
	require.EqualValues(t, 3000, n)
	copies := listDir(t, cache)
	require.Len(t, copies, 2, "the images and the labels, decoded")
	for _, c := range copies {
		require.NotContains(t, c, ".gz")
	}

	im, _, _, _ = readFrom(t, path, 10)
	wantIm, _ = want(10, 0)
	require.Equal(t, wantIm, im)
	require.Equal(t, copies, listDir(t, cache), "decoded once")

	path = writeMNIST(t, data, 3000, 1) // changed in place
	im, _, _, _ = readFrom(t, path, 7)
	wantIm, _ = want(7, 1)
	require.Equal(t, wantIm, im)
	require.Len(t, listDir(t, cache), 4, "the changed files decoded anew")

	for _, c := range listDir(t, cache) {
		require.NoError(t, os.Remove(filepath.Join(cache, c)))
	}
	t.Setenv(readers.DecodeCacheEnv, "off")
	im, _, _, counted = readFrom(t, path, 2999)
	require.Equal(t, []byte{byte(2999%256) + 1}, im)
	require.False(t, counted, "a stream is counted by reading it")
	require.Empty(t, listDir(t, cache))
}

// A damaged gzip'd file leaves no copy, and its damage is reported as
// reading it forward finds it, naming the file.
func TestDamagedGzipIDXIsNotDecoded(t *testing.T) {
	cache, data := t.TempDir(), t.TempDir()
	t.Setenv(readers.DecodeCacheEnv, cache)
	path := writeMNIST(t, data, 3000, 0)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-6] ^= 0xff // the data's CRC-32
	require.NoError(t, os.WriteFile(path, b, 0o644))

	r, err := readers.Open("idx:"+path, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	_, counted := countOf(r)
	require.False(t, counted)
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(2999))
	_, err = r.Next(context.Background())
	require.NoError(t, err, "the last sample is whole: the checksum is checked at the end")
	_, err = r.Next(context.Background())
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, path)
	require.Empty(t, listDir(t, cache), "no copy, and no temporary file left")
}
