package wds_test

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type file struct {
	name string
	data []byte
}

// shard writes files into a tar, as the webdataset library does.
func shard(t testing.TB, files ...file) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, f := range files {
		require.NoError(t, w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o444, Size: int64(len(f.data)), Typeflag: tar.TypeReg}))
		_, err := w.Write(f.data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// npy is a version 1 .npy file of little-endian float32 values.
func npy(shape string, values ...float32) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape)
	header += strings.Repeat(" ", 63-(10+len(header))%64) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	b = append(b, header...)
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, mathFloat32bits(v))
	}
	return b
}

// samples is n samples of fields cls, jpg and npy; sample i's key is a
// directory path when long, so that its header needs PAX records.
func samples(n int, long bool) []file {
	var out []file
	for i := range n {
		key := fmt.Sprintf("s%04d", i)
		if long {
			key = strings.Repeat("d", 120) + "/" + key
		}
		out = append(out,
			file{key + ".jpg", bytes.Repeat([]byte{byte(i)}, 10+i)},
			file{key + ".cls", []byte(fmt.Sprintf("%d\n", i%7))},
			file{key + ".npy", npy("2,", float32(i), -float32(i))})
	}
	return out
}

// readAll reads every sample from where r stands.
func readAll(t *testing.T, r *wds.Reader) (keys []string, all []tensor.Slots) {
	t.Helper()
	for {
		k, s, err := r.Next()
		if errors.Is(err, io.EOF) {
			return keys, all
		}
		require.NoError(t, err)
		keys, all = append(keys, k), append(all, s)
	}
}

func TestSamplesComeAsFieldsInTheirNamesOrder(t *testing.T) {
	r := wds.NewReader(bytes.NewReader(shard(t, samples(3, false)...)), "s.tar")
	keys, all := readAll(t, r)
	require.Equal(t, []string{"s0000", "s0001", "s0002"}, keys)
	require.Equal(t, []string{"cls", "jpg", "npy"}, r.Fields())
	s := all[2]
	cls, err := tensor.View[int64](s[0].Tensor)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, cls)
	require.Equal(t, bytes.Repeat([]byte{2}, 12), s[1].Bytes())
	require.Equal(t, tensor.LoD{{0, 12}}, s[1].LoD)
	require.Equal(t, tensor.Shape{1, 2}, s[2].Shape())
	vals, err := tensor.View[float32](s[2].Tensor)
	require.NoError(t, err)
	require.Equal(t, []float32{2, -2}, vals)
}

// Offsets gives where each sample starts, PAX records and all, and Seek
// there reads from that sample on.
func TestOffsetsAndSeek(t *testing.T) {
	for _, long := range []bool{false, true} {
		b := shard(t, samples(5, long)...)
		_, want := readAll(t, wds.NewReader(bytes.NewReader(b), "s.tar"))
		offsets, err := wds.NewReader(bytes.NewReader(b), "s.tar").Offsets()
		require.NoError(t, err)
		require.Len(t, offsets, 5)
		require.Zero(t, offsets[0])
		for n := range 5 {
			r := wds.NewReader(bytes.NewReader(b), "s.tar")
			require.NoError(t, r.Seek(n, offsets[n]))
			_, got := readAll(t, r)
			require.Equal(t, len(want)-n, len(got), "long %v, sample %d", long, n)
			for i := range got {
				require.True(t, want[n+i].Equal(got[i]), "long %v, sample %d", long, n+i)
			}
		}
	}
}

// Damage to a field's data is an error naming the shard, sample, member
// and offset, after which the next sample reads; damage to the tar
// itself stops the shard.
func TestDamage(t *testing.T) {
	files := samples(3, false)
	files[4].data = []byte("seven") // s0001.cls
	b := shard(t, files...)
	r := wds.NewReader(bytes.NewReader(b), "s.tar")
	_, _, err := r.Next()
	require.NoError(t, err)
	_, _, err = r.Next()
	require.ErrorIs(t, err, format.ErrCorrupt)
	for _, want := range []string{"s.tar", "record 1", "offset 4096", "member s0001.cls", "not a decimal integer"} {
		require.ErrorContains(t, err, want)
	}
	require.False(t, r.Broken())
	k, _, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, "s0002", k)

	files = samples(3, false)
	files = append(files[:4], files[5:]...) // s0001 without its cls
	_, _, err = nthErr(wds.NewReader(bytes.NewReader(shard(t, files...)), "s.tar"), 1)
	require.ErrorContains(t, err, "sample s0001 has the fields [jpg npy], the shard's first [cls jpg npy]")

	b = shard(t, samples(3, false)...)
	offsets, err := wds.NewReader(bytes.NewReader(b), "s.tar").Offsets()
	require.NoError(t, err)
	b[offsets[1]+148] ^= 0x55 // the header's checksum
	r = wds.NewReader(bytes.NewReader(b), "s.tar")
	_, _, err = nthErr(r, 1)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("offset %d", offsets[1]))
	require.True(t, r.Broken())
	_, _, err2 := r.Next()
	require.Equal(t, err, err2, "nothing after damage to the tar")
}

// nthErr reads samples up to sample n, returning the first error.
func nthErr(r *wds.Reader, n int) (string, tensor.Slots, error) {
	for range n {
		if _, _, err := r.Next(); err != nil {
			return "", nil, err
		}
	}
	return r.Next()
}

func TestNPYHeadersAreChecked(t *testing.T) {
	good := npy("2, 1", 1, 2)
	cases := map[string][]byte{
		"no \\x93NUMPY magic":   []byte("NUMPY......"),
		"Fortran-order":         bytes.Replace(good, []byte("False"), []byte("True "), 1),
		"does not fit":          bytes.Replace(good, []byte("(2, 1)"), []byte("(9, 1)"), 1),
		"dtype \">f4\"":         bytes.Replace(good, []byte("<f4"), []byte(">f4"), 1),
		"a header of 65535":     append(good[:8:8], 0xff, 0xff),
		"shape (-1,1) does not": bytes.Replace(good, []byte("(2, 1)"), []byte("(-1,1)"), 1),
	}
	for want, data := range cases {
		r := wds.NewReader(bytes.NewReader(shard(t, file{"a.npy", data})), "s.tar")
		_, _, err := r.Next()
		require.ErrorIs(t, err, format.ErrCorrupt, want)
		require.ErrorContains(t, err, want)
	}
	_, s, err := wds.NewReader(bytes.NewReader(shard(t, file{"a.npy", good})), "s.tar").Next()
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{1, 2, 1}, s[0].Shape())
}

// A gzip'd shard reads as its tar; Decode gives the tar back, checked.
func TestGzipShards(t *testing.T) {
	b := shard(t, samples(4, false)...)
	var z bytes.Buffer
	zw := gzipWriter(&z)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	r, err := wds.NewGzipReader(bytes.NewReader(z.Bytes()), "s.tar.gz")
	require.NoError(t, err)
	_, want := readAll(t, wds.NewReader(bytes.NewReader(b), "s.tar"))
	_, got := readAll(t, r)
	require.Equal(t, len(want), len(got))
	var out bytes.Buffer
	require.NoError(t, wds.Decode(&out, bytes.NewReader(z.Bytes()), "s.tar.gz", -1))
	require.Equal(t, b, out.Bytes())
	require.Error(t, wds.Decode(io.Discard, bytes.NewReader(z.Bytes()), "s.tar.gz", 100))
	damaged := bytes.Clone(z.Bytes())
	damaged[len(damaged)-6] ^= 0xff
	require.ErrorIs(t, wds.Decode(io.Discard, bytes.NewReader(damaged), "s.tar.gz", -1), format.ErrCorrupt)
}

// Any bytes read as a shard end in samples, io.EOF or damage, never a
// panic, and never a member over the bound.
func FuzzShard(f *testing.F) {
	f.Add(shard(f, samples(2, false)...))
	f.Add(shard(f, samples(1, true)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := wds.NewReader(bytes.NewReader(b), "fuzz.tar")
		for range 1000 {
			_, s, err := r.Next()
			if errors.Is(err, io.EOF) || r.Broken() {
				return
			}
			if err != nil {
				if !errors.Is(err, format.ErrCorrupt) {
					t.Fatalf("not classed as damage: %v", err)
				}
				continue
			}
			for _, x := range s {
				if len(x.Bytes()) > len(b) {
					t.Fatalf("a field of %d bytes from %d", len(x.Bytes()), len(b))
				}
			}
		}
	})
}

// Any shard whose spans can be read reads by them as through tar: the same
// samples, the same errors.
func FuzzSpans(f *testing.F) {
	f.Add(shard(f, samples(2, false)...))
	f.Add(shard(f, samples(1, true)...))
	f.Add(shard(f, file{"a.txt", []byte("one")}, file{"a.jpg", []byte("two")}, file{"b.txt", []byte("3")}, file{"b.jpg", []byte("4")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		sp, err := wds.NewReader(bytes.NewReader(b), "fuzz.tar").Spans()
		if err != nil {
			return
		}
		r := wds.NewReader(bytes.NewReader(b), "fuzz.tar")
		sr := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), "fuzz.tar", sp)
		so := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), "fuzz.tar", sp)
		st := tensor.NewStack(max(sp.Len(), 1))
		for i := range sp.Len() {
			_, want, werr := r.Next()
			got, err := sr.Next()
			if (werr == nil) != (err == nil) || werr != nil && werr.Error() != err.Error() {
				t.Fatalf("sample %d: tar gives %v, the spans %v", i, werr, err)
			}
			if werr == nil && !want.Equal(got) {
				t.Fatalf("sample %d: tar reads %v, the spans %v", i, want, got)
			}
			stacked, err := so.NextOnto(st)
			if werr == nil && err == nil && stacked == nil {
				stacked, err = st.Row(st.Len() - 1)
			}
			if (werr == nil) != (err == nil) || werr == nil && !want.Equal(stacked) {
				t.Fatalf("sample %d: tar reads %v (%v), onto a stack %v (%v)", i, want, werr, stacked, err)
			}
			if r.Broken() {
				return
			}
		}
	})
}

func mathFloat32bits(v float32) uint32 { return math.Float32bits(v) }

func gzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

// A read that fails is not damage: the error is the read's, so that the
// file reader retries rather than skipping, raw or gzip'd, in a header or
// in a member's data.
func TestAFailedReadIsNotDamage(t *testing.T) {
	eio := &os.PathError{Op: "read", Path: "s", Err: syscall.EIO}
	data := shard(t, samples(3, false)...)
	for _, cut := range []int{100, 512 + 3} {
		r := wds.NewReader(&testutil.FailingReader{Data: data[:cut], Err: eio}, "s.tar")
		_, _, err := r.Next()
		require.ErrorIs(t, err, syscall.EIO, "cut at %d", cut)
		require.NotErrorIs(t, err, format.ErrCorrupt, "cut at %d", cut)
	}
	var z bytes.Buffer
	zw := gzipWriter(&z)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	r, err := wds.NewGzipReader(&testutil.FailingReader{Data: z.Bytes()[:z.Len()/2], Err: eio}, "s.tar.gz")
	require.NoError(t, err)
	for err == nil {
		_, _, err = r.Next()
	}
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, format.ErrCorrupt)
}

// spansOf reads a shard's spans from its start.
func spansOf(t testing.TB, b []byte) *wds.Spans {
	t.Helper()
	sp, err := wds.NewReader(bytes.NewReader(b), "s.tar").Spans()
	require.NoError(t, err)
	return sp
}

// A shard read by its spans gives what the tar reader gives, PAX records
// and all, from any sample; a sample whose fields are not the first's, or
// whose data is bad, is read through tar and named as tar names it, and the
// next sample reads.
func TestSpansReadAsTarDoes(t *testing.T) {
	for _, long := range []bool{false, true} {
		files := samples(6, long)
		files[4].data = []byte("seven")         // s0001.cls
		files = append(files[:7], files[8:]...) // s0002 has no cls
		b := shard(t, files...)
		sp := spansOf(t, b)
		require.Equal(t, 6, sp.Len())
		require.Equal(t, []string{"cls", "jpg", "npy"}, sp.Fields())
		offsets, err := wds.NewReader(bytes.NewReader(b), "s.tar").Offsets()
		require.NoError(t, err)
		require.Equal(t, offsets, sp.Starts())
		var want []tensor.Slots
		var errs []error
		r := wds.NewReader(bytes.NewReader(b), "s.tar")
		for range 6 {
			_, s, err := r.Next()
			want, errs = append(want, s), append(errs, err)
		}
		require.Error(t, errs[1])
		require.Error(t, errs[2])
		for from := range 6 {
			sr := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), "s.tar", sp)
			require.NoError(t, sr.Seek(from))
			for i := from; i < 6; i++ {
				got, err := sr.Next()
				if errs[i] != nil {
					require.EqualError(t, err, errs[i].Error(), "long %v, sample %d", long, i)
					continue
				}
				require.NoError(t, err)
				require.True(t, want[i].Equal(got), "long %v, sample %d", long, i)
			}
			_, err := sr.Next()
			require.ErrorIs(t, err, io.EOF)
		}
	}
}

// A span past the shard's end (a shard cut short since its spans were
// read) is damage naming the member and offset; a failed read is the
// read's error.
func TestSpansOfAShardCutShort(t *testing.T) {
	b := shard(t, samples(3, false)...)
	sp := spansOf(t, b)
	cut := b[:sp.Starts()[2]+600]
	r := wds.NewSpanReader(bytes.NewReader(cut), int64(len(cut)), "s.tar", sp)
	require.NoError(t, r.Seek(2))
	_, err := r.Next()
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "s.tar")
	require.ErrorContains(t, err, "member s0002.", "named as tar names it")

	eio := &os.PathError{Op: "read", Path: "s", Err: syscall.EIO}
	r = wds.NewSpanReader(failingAt{b, 1024, eio}, int64(len(b)), "s.tar", sp)
	_, err = r.Next()
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, format.ErrCorrupt)
}

// failingAt reads data and fails with err from offset at on.
type failingAt struct {
	data []byte
	at   int64
	err  error
}

func (f failingAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		return int(max(0, min(int64(len(p)), f.at-off))), f.err
	}
	return copy(p, f.data[off:]), nil
}

// Spans read back as they were kept; any bytes read as kept spans are
// refused, or spans that lie within the shard, never a panic or an
// allocation past their size.
func FuzzUnmarshalSpans(f *testing.F) {
	files := samples(4, false)
	files = append(files[:7], files[8:]...) // an irregular sample
	b := shard(f, files...)
	sp := spansOf(f, b)
	kept, err := sp.MarshalBinary()
	require.NoError(f, err)
	back, err := wds.UnmarshalSpans(kept, int64(len(b)))
	require.NoError(f, err)
	require.Equal(f, sp, back)
	// The fuzzer's bytes are the body: its checksum is put right, so that
	// every input reaches the checks past it.
	f.Add(kept[:len(kept)-4], int64(len(b)))
	f.Add(kept[:30], int64(len(b)))
	f.Fuzz(func(t *testing.T, body []byte, size int64) {
		kept := binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		sp, err := wds.UnmarshalSpans(kept, size)
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not classed as damage: %v", err)
			}
			return
		}
		if sp.Len() > len(kept) {
			t.Fatalf("%d samples from %d bytes", sp.Len(), len(kept))
		}
		for _, s := range sp.Starts() {
			if s < 0 || s >= size {
				t.Fatalf("a sample at %d of %d", s, size)
			}
		}
		// Read by them, a shard of that size of zeros gives samples or
		// errors, never a panic.
		if size <= 1<<16 {
			zeros := make([]byte, size)
			r := wds.NewSpanReader(bytes.NewReader(zeros), size, "fuzz.tar", sp)
			for range sp.Len() {
				r.Next()
			}
		}
	})
}

// countedReaderAt counts the bytes read from it.
type countedReaderAt struct {
	b     []byte
	bytes int
}

func (c *countedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := bytes.NewReader(c.b).ReadAt(p, off)
	c.bytes += n
	return n, err
}

// Samples read onto a stack keep their own bytes where a sample straddles
// the reader's window and its fields lie in the tar in another order than
// the slots (txt before jpg; slots jpg, txt): moving the window for one
// field must not change another already viewed. And the window is read
// once, not once a field.
func TestStackedSamplesStraddlingTheWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() []byte {
		b := make([]byte, 1000+rng.IntN(9000))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	const n = 150
	var files []file
	for i := range n {
		key := fmt.Sprintf("s%04d", i)
		files = append(files, file{key + ".txt", random()}, file{key + ".jpg", random()})
	}
	b := shard(t, files...)
	sp := spansOf(t, b)
	require.Equal(t, []string{"jpg", "txt"}, sp.Fields())
	src := &countedReaderAt{b: b}
	sr := wds.NewSpanReader(src, int64(len(b)), "s.tar", sp)
	st := tensor.NewStack(n)
	for i := range n {
		out, err := sr.NextOnto(st)
		require.NoError(t, err)
		require.Nil(t, out, "sample %d stacks", i)
	}
	r := wds.NewReader(bytes.NewReader(b), "s.tar")
	for i := range n {
		_, want, err := r.Next()
		require.NoError(t, err)
		row, err := st.Row(i)
		require.NoError(t, err)
		require.Equal(t, want[0].Bytes()[:16], row[0].Bytes()[:16], "sample %d jpg", i)
		require.Equal(t, want[1].Bytes()[:16], row[1].Bytes()[:16], "sample %d txt", i)
		require.True(t, want.Equal(row), "sample %d", i)
	}
	require.Less(t, src.bytes, len(b)+len(b)/10, "the shard is read about once")
}
