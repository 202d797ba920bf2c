package idx_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestFashionMNIST(t *testing.T) {
	dir := testutil.FashionDir(t)
	for _, c := range []struct {
		prefix string
		n      int
	}{{"train", 60000}, {"t10k", 10000}} {
		images := filepath.Join(dir, c.prefix+"-images-idx3-ubyte.gz")
		labels, ok := idx.CompanionLabels(images)
		require.True(t, ok)
		p, err := idx.OpenPair(images, labels)
		require.NoError(t, err)
		perClass := map[uint8]int{}
		n := 0
		for {
			img, lbl, err := p.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.Equal(t, tensor.Uint8, img.DType())
			require.Equal(t, tensor.Shape{1, 28, 28}, img.Shape())
			require.Equal(t, tensor.Shape{1}, lbl.Shape())
			v, err := tensor.View[uint8](lbl)
			require.NoError(t, err)
			require.Less(t, v[0], uint8(10))
			perClass[v[0]]++
			n++
		}
		require.NoError(t, p.Close())
		assert.Equal(t, c.n, n, c.prefix)
		require.Len(t, perClass, 10)
		for class, count := range perClass {
			assert.Equal(t, c.n/10, count, "%s class %d", c.prefix, class)
		}
	}
}

// writeIDX writes an IDX file of the given type code and dims with values
// produced big-endian by put.
func writeIDX(t *testing.T, path string, code byte, dims []uint32, data []byte, gz bool) {
	t.Helper()
	var b bytes.Buffer
	b.Write([]byte{0, 0, code, byte(len(dims))})
	for _, d := range dims {
		_ = binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(data)
	out := b.Bytes()
	if gz {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(out)
		require.NoError(t, w.Close())
		out = z.Bytes()
	}
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

func TestMultiByteTypesAreConvertedToLittleEndian(t *testing.T) {
	dir := t.TempDir()
	var data bytes.Buffer
	for _, v := range []int16{-2, 300, 7, -32768, 1, 2} {
		_ = binary.Write(&data, binary.BigEndian, v)
	}
	for _, gz := range []bool{false, true} {
		path := filepath.Join(dir, "x.idx")
		writeIDX(t, path, 0x0B, []uint32{3, 2}, data.Bytes(), gz)
		r, err := idx.Open(path)
		require.NoError(t, err)
		var got []int16
		for {
			s, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.Equal(t, tensor.Shape{1, 2}, s.Shape())
			v, err := tensor.View[int16](s)
			require.NoError(t, err)
			got = append(got, v...)
		}
		require.NoError(t, r.Close())
		assert.Equal(t, []int16{-2, 300, 7, -32768, 1, 2}, got, "gzip=%v", gz)
	}

	var f bytes.Buffer
	_ = binary.Write(&f, binary.BigEndian, float32(1.5))
	path := filepath.Join(dir, "f.idx")
	writeIDX(t, path, 0x0D, []uint32{1}, f.Bytes(), false)
	r, err := idx.Open(path)
	require.NoError(t, err)
	s, err := r.Next()
	require.NoError(t, err)
	v, err := tensor.View[float32](s)
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5}, v)
	require.NoError(t, r.Close())
}

func TestDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.idx")
	data := bytes.Repeat([]byte{7}, 4*5)

	// Raw file shorter than its header declares: truncation, found at open.
	writeIDX(t, path, 0x08, []uint32{5, 5}, data[:17], false)
	_, err := idx.Open(path)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.ErrorIs(t, err, format.ErrCorrupt)
	var fe *format.Error
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, path, fe.File)
	assert.Contains(t, err.Error(), path)

	// Gzipped and cut short: found at the sample, which is named.
	writeIDX(t, path, 0x08, []uint32{5, 4}, data[:17], true)
	r, err := idx.Open(path)
	require.NoError(t, err)
	for range 4 {
		_, err = r.Next()
		require.NoError(t, err)
	}
	_, err = r.Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, 4, fe.Record)
	assert.Equal(t, int64(4+8+16), fe.Offset)
	require.NoError(t, r.Close())

	// Trailing bytes after the declared samples.
	writeIDX(t, path, 0x08, []uint32{2, 4}, data[:9], false)
	_, err = idx.Open(path)
	assert.ErrorIs(t, err, format.ErrCorrupt)
	assert.ErrorContains(t, err, "after the 2 declared samples")

	// Bad magic and unknown type.
	require.NoError(t, os.WriteFile(path, []byte{1, 0, 8, 1, 0, 0, 0, 0}, 0o644))
	_, err = idx.Open(path)
	assert.ErrorIs(t, err, format.ErrCorrupt)
	assert.ErrorContains(t, err, "magic")
	require.NoError(t, os.WriteFile(path, []byte{0, 0, 0x42, 1, 0, 0, 0, 0}, 0o644))
	_, err = idx.Open(path)
	assert.ErrorContains(t, err, "element type")

	// Mismatched pair.
	labels := filepath.Join(dir, "l.idx")
	writeIDX(t, path, 0x08, []uint32{2, 4}, data[:8], false)
	writeIDX(t, labels, 0x08, []uint32{3}, data[:3], false)
	_, err = idx.OpenPair(path, labels)
	assert.ErrorContains(t, err, "3 labels for 2 images")

	_, err = idx.Open(filepath.Join(dir, "missing.idx"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestCompanionLabels(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "train-images-idx3-ubyte.gz")
	_, ok := idx.CompanionLabels(images)
	assert.False(t, ok)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "train-labels-idx1-ubyte.gz"), nil, 0o644))
	got, ok := idx.CompanionLabels(images)
	assert.True(t, ok)
	assert.Equal(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), got)
	_, ok = idx.CompanionLabels(filepath.Join(dir, "other.idx"))
	assert.False(t, ok)
}

func FuzzHeader(f *testing.F) {
	f.Add([]byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 0, 0x0e, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := idx.NewReader(bytes.NewReader(b), int64(len(b)), "fuzz")
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not classed as corruption: %v", err)
			}
			return
		}
		total := 0
		for {
			s, err := r.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, format.ErrCorrupt) {
					t.Fatalf("sample error not classed: %v", err)
				}
				break
			}
			total += len(s.Bytes())
			if total > len(b)*1100+1024 {
				t.Fatalf("read %d bytes of samples from %d input bytes", total, len(b))
			}
		}
	})
}

// A raw file with bytes after its declared samples was rejected and the
// same file gzipped accepted. One rule for both: corruption, found at the
// end of the samples.
func TestBytesAfterTheSamplesAreCorruptRawOrGzipped(t *testing.T) {
	dir := t.TempDir()
	for _, gz := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("x-%v-ubyte", gz))
		writeIDX(t, path, 0x08, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6, 7}, gz)
		r, err := idx.Open(path)
		if err == nil {
			defer r.Close()
			for range 2 {
				_, err = r.Next()
				require.NoError(t, err, "gzip=%v", gz)
			}
			_, err = r.Next()
		}
		require.ErrorIs(t, err, format.ErrCorrupt, "gzip=%v", gz)
		require.ErrorContains(t, err, "bytes after the 2 declared samples")
		require.ErrorContains(t, err, path)
	}
}

// samplesOf reads every sample of r from where it stands.
func samplesOf(t *testing.T, r *idx.Reader) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		s, err := r.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, bytes.Clone(s.Bytes()))
	}
}

// Seek puts a raw file anywhere, back too, and a gzip stream forward; a
// stream cannot go back, and no file past its end.
func TestSeek(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 10*4*2)
	for i := range data {
		data[i] = byte(i)
	}
	for _, gz := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("s-%v-ubyte", gz))
		writeIDX(t, path, 0x0B, []uint32{10, 4}, data, gz) // int16: converted as read
		r, err := idx.Open(path)
		require.NoError(t, err)
		all := samplesOf(t, r)
		require.Len(t, all, 10)
		require.NoError(t, r.Close())

		r, err = idx.Open(path)
		require.NoError(t, err)
		require.NoError(t, r.Seek(3))
		require.Equal(t, all[3:], samplesOf(t, r), "gzip=%v", gz)
		err = r.Seek(1)
		if gz {
			require.ErrorContains(t, err, "seek back to sample 1 from 10")
		} else {
			require.NoError(t, err)
			require.Equal(t, all[1:], samplesOf(t, r))
		}
		require.ErrorContains(t, r.Seek(11), "seek to sample 11 of 10")
		require.Equal(t, gz, r.Gzipped())
		require.NoError(t, r.Close())
	}
}

// Decode writes a gzip'd file's uncompressed bytes, which read as the file
// does; damage, a header beyond the limit and a failing writer are errors,
// the first two naming the stream.
func TestDecode(t *testing.T) {
	dir := t.TempDir()
	raw, gz := filepath.Join(dir, "d-ubyte"), filepath.Join(dir, "d-ubyte.gz")
	data := bytes.Repeat([]byte{7, 1, 2}, 200)
	writeIDX(t, raw, 0x08, []uint32{100, 2, 3}, data, false)
	writeIDX(t, gz, 0x08, []uint32{100, 2, 3}, data, true)
	want, err := os.ReadFile(raw)
	require.NoError(t, err)
	src, err := os.ReadFile(gz)
	require.NoError(t, err)

	var out bytes.Buffer
	h, err := idx.Decode(&out, bytes.NewReader(src), int64(len(src)), gz, -1)
	require.NoError(t, err)
	require.Equal(t, want, out.Bytes())
	require.Equal(t, int64(len(want)), h.Bytes())

	_, err = idx.Decode(io.Discard, bytes.NewReader(src), int64(len(src)), gz, 100)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, gz)

	damaged := bytes.Clone(src)
	damaged[len(damaged)-6] ^= 0xff // the CRC-32 of the data
	_, err = idx.Decode(io.Discard, bytes.NewReader(damaged), int64(len(damaged)), gz, -1)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, gz)

	full := errors.New("disk full")
	_, err = idx.Decode(failingWriter{full}, bytes.NewReader(src), int64(len(src)), gz, -1)
	require.ErrorIs(t, err, full)
	require.NotErrorIs(t, err, format.ErrCorrupt)
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// Decode never writes more than the header declares, whatever the stream
// holds, nor fails other than as corruption or the writer's error.
func FuzzDecode(f *testing.F) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write([]byte{0, 0, 8, 2, 0, 0, 0, 3, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6})
	_ = w.Close()
	f.Add(z.Bytes())
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		h, err := idx.Decode(&out, bytes.NewReader(b), int64(len(b)), "fuzz", 1<<20)
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not classed as corruption: %v", err)
			}
			if int64(out.Len()) > 1<<20+1<<17 {
				t.Fatalf("wrote %d bytes past a limit of 1 MiB", out.Len())
			}
			return
		}
		if int64(out.Len()) != h.Bytes() {
			t.Fatalf("wrote %d bytes for a header of %d", out.Len(), h.Bytes())
		}
	})
}
