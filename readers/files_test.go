package readers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// writeInstances writes n (image [1,4] float32, label [1] int64) instances.
func writeInstances(t testing.TB, path string, n int, c recordio.Compressor) {
	t.Helper()
	wrote, err := readers.WriteRecordFile(path, recordio.WriterOptions{Compressor: c, MaxChunkBytes: 1 << 10}, instances(n, nil))
	require.NoError(t, err)
	require.Equal(t, n, wrote)
}

// instances yields n of writeInstances' instances, then fail if not nil.
func instances(n int, fail error) iter.Seq2[tensor.Slots, error] {
	m := n
	if fail != nil {
		m++
	}
	return readers.Samples(m, func(i int) (tensor.Slots, error) {
		if i == n {
			return nil, fail
		}
		return tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 4}, []float32{float32(i), 1, 2, 3})},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})},
		}, nil
	})
}

// WriteRecordFile writes what RecordFile reads, and leaves no file behind
// when the samples, their encoding or the file fail.
func TestWriteRecordFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ok.rio")
	n, err := readers.WriteRecordFile(path, recordio.WriterOptions{Compressor: recordio.Snappy}, instances(300, nil))
	require.NoError(t, err)
	require.Equal(t, 300, n)
	r, err := readers.OpenRecordFile(path)
	require.NoError(t, err)
	defer r.Close()
	i := 0
	for s, err := range readers.All(t.Context(), r) {
		require.NoError(t, err)
		label, err := tensor.View[int64](s[1].Tensor)
		require.NoError(t, err)
		require.Equal(t, []int64{int64(i)}, label)
		i++
	}
	require.Equal(t, 300, i)

	boom := errors.New("boom")
	bad := filepath.Join(dir, "bad.rio")
	n, err = readers.WriteRecordFile(bad, recordio.WriterOptions{}, instances(5, boom))
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "bad.rio, sample 5")
	require.Zero(t, n)
	require.NoFileExists(t, bad)

	unencodable := func(yield func(tensor.Slots, error) bool) { yield(tensor.Slots{{}}, nil) } // no dtype
	_, err = readers.WriteRecordFile(bad, recordio.WriterOptions{}, unencodable)
	require.ErrorContains(t, err, "bad.rio, sample 0")
	require.NoFileExists(t, bad)

	_, err = readers.WriteRecordFile(filepath.Join(dir, "no-such-dir", "x.rio"), recordio.WriterOptions{}, instances(1, nil))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseEntry(t *testing.T) {
	cases := []struct{ entry, format, path string }{
		{"recordio:/data/a.bin", "recordio", "/data/a.bin"},
		{"recordio:/data/with:colon.bin", "recordio", "/data/with:colon.bin"},
		{"/data/a.recordio", "recordio", "/data/a.recordio"},
		{"shard-0.rio", "recordio", "shard-0.rio"},
		{"/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "idx", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"},
		{"./dir:x/a.recordio", "recordio", "./dir:x/a.recordio"}, // ':' inside a bare path
		{"idx:foo", "idx", "foo"},
		{"tfrecord(image/encoded=bytes, label=int64):/d/a:b", "tfrecord(image/encoded=bytes, label=int64)", "/d/a:b"},
		{"/d/x(1):y.tfrecord", "tfrecord", "/d/x(1):y.tfrecord"},
		{"/d/train.tfrecord.gz", "tfrecord", "/d/train.tfrecord.gz"},
	}
	for _, c := range cases {
		f, p, err := readers.ParseEntry(c.entry)
		require.NoError(t, err, c.entry)
		assert.Equal(t, c.format, f, c.entry)
		assert.Equal(t, c.path, p, c.entry)
	}
	for _, bad := range []string{"", "  ", "parquet:/a", "recordio:", "/data/a.csv", "tfrecord(label=text):a",
		"tfrecord(label=int64)a", "tfrecord(label=int64):", "wds(jpg):a.tar"} {
		_, _, err := readers.ParseEntry(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, readers.ErrUnknownFormat) || errors.Is(err, readers.ErrBadEntry), "%q: %v", bad, err)
	}
	_, _, err := readers.ParseEntry("parquet:/a")
	assert.ErrorContains(t, err, `"parquet"`)
	assert.ErrorContains(t, err, "recordio")
	assert.Contains(t, readers.Formats(), "idx")
	_, _, err = readers.ParseEntry("wds(jpg):a.tar")
	assert.ErrorContains(t, err, "format wds takes no parameters")
	_, _, err = readers.ParseEntry("tfrecord(label=text):a")
	assert.ErrorContains(t, err, `kind "text"`)
}

func TestRegisterRefusesAmbiguousFormats(t *testing.T) {
	open := func(string, readers.OpenOptions) (readers.Reader, error) { return nil, nil }
	assert.PanicsWithValue(t, `readers: Register of "rio2": suffix ".RIO" already names format "recordio"`, func() {
		readers.Register(readers.Format{Name: "rio2", Suffixes: []string{".RIO"}, Open: open})
	})
	assert.Panics(t, func() { readers.Register(readers.Format{Name: "recordio", Open: open}) })
	assert.Panics(t, func() { readers.Register(readers.Format{Name: "Bad:Name", Open: open}) })
	assert.NotContains(t, readers.Formats(), "rio2")
}

func TestRecordFileReadsCheckedInstances(t *testing.T) {
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		path := filepath.Join(t.TempDir(), "part.recordio")
		writeInstances(t, path, 165, c)
		specs := []readers.SlotSpec{
			{Name: "image", Shape: tensor.Shape{-1, 4}, DType: tensor.Float32},
			{Name: "label", Shape: tensor.Shape{1}, DType: tensor.Int64},
		}
		r, err := readers.Open(path, readers.OpenOptions{Slots: specs})
		require.NoError(t, err)
		b := readers.Batch(r, 32, false)
		batches, err := readers.ReadAll(context.Background(), b)
		require.NoError(t, err)
		require.Len(t, batches, 6)
		assert.Equal(t, tensor.Shape{32, 4}, batches[0][0].Shape())
		labels := values(t, func() (out []tensor.Slots) {
			for _, x := range batches {
				out = append(out, x[1:])
			}
			return
		}())
		assert.Equal(t, seq(0, 164), labels, "images and labels stay aligned")
		require.NoError(t, b.Reset())
		again, err := readers.ReadAll(context.Background(), b)
		require.NoError(t, err)
		assert.Len(t, again, 6)
		require.NoError(t, b.Close())
	}
}

func TestDeclaredShapeMismatchNamesTheSlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.recordio")
	writeInstances(t, path, 3, recordio.NoCompression)
	specs := []readers.SlotSpec{
		{Name: "image", Shape: tensor.Shape{-1, 5}, DType: tensor.Float32},
		{Name: "label", Shape: tensor.Shape{1}, DType: tensor.Int64},
	}
	r, err := readers.Open("recordio:"+path, readers.OpenOptions{Slots: specs})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Next(context.Background())
	require.ErrorIs(t, err, tensor.ErrShape)
	assert.ErrorContains(t, err, "slot 0 (image)")
	assert.ErrorContains(t, err, "[1,4]")
}

func TestRecordFileNamesTheBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.recordio")
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := recordio.NewWriter(f, recordio.WriterOptions{})
	require.NoError(t, err)
	good, err := tensor.Encode(item(1))
	require.NoError(t, err)
	require.NoError(t, w.Write(good))
	require.NoError(t, w.Write([]byte("not a tensor")))
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())

	r, err := readers.Open(path, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Next(context.Background())
	require.NoError(t, err)
	_, err = r.Next(context.Background())
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorIs(t, err, tensor.ErrMalformed)
	var fe *format.Error
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, 1, fe.Record)
	assert.Equal(t, path, fe.File)
	assert.ErrorContains(t, err, "record 1")
}

func TestOpenMissingFile(t *testing.T) {
	_, err := readers.Open(filepath.Join(t.TempDir(), "nope.recordio"), readers.OpenOptions{})
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorContains(t, err, "nope.recordio")
}

// Formats open their files with OpenOptions.Open when it is set (a data
// service worker's opens them only inside its roots): both files of an IDX
// pair, and a RecordIO file, whose opener's error comes back.
func TestOpenOptionsOpenOpensEveryFile(t *testing.T) {
	dir := t.TempDir()
	images, labels := filepath.Join(dir, "x-images-idx3-ubyte"), filepath.Join(dir, "x-labels-idx1-ubyte")
	require.NoError(t, os.WriteFile(images, []byte{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4}, 0o644))
	require.NoError(t, os.WriteFile(labels, []byte{0, 0, 8, 1, 0, 0, 0, 2, 7, 9}, 0o644))
	var opened []string
	open := func(path string, flag int) (*os.File, error) {
		opened = append(opened, path)
		return os.OpenFile(path, flag, 0)
	}
	r, err := readers.Open(images, readers.OpenOptions{Open: open})
	require.NoError(t, err)
	n := 0
	for s, err := range readers.All(context.Background(), r) {
		require.NoError(t, err)
		require.Len(t, s, 2, "(image, label)")
		n++
	}
	require.Equal(t, 2, n)
	require.NoError(t, r.Close())
	require.Equal(t, []string{images, labels}, opened)

	path := filepath.Join(dir, "d.recordio")
	writeInstances(t, path, 3, recordio.NoCompression)
	refused := errors.New("not under a root")
	_, err = readers.Open(path, readers.OpenOptions{Open: func(string, int) (*os.File, error) { return nil, refused }})
	require.ErrorIs(t, err, refused)
	fifo := filepath.Join(dir, "pipe.recordio")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err = readers.Open(fifo, readers.OpenOptions{Open: open})
	require.ErrorIs(t, err, format.ErrNotRegular, "checked through the descriptor")
}

func TestFashionMNISTThroughTheRegistry(t *testing.T) {
	dir := os.Getenv("ACTORFEED_FASHION_MNIST")
	if dir == "" {
		dir = idx.FashionMNISTDir
	}
	images := filepath.Join(dir, "t10k-images-idx3-ubyte.gz")
	if _, err := os.Stat(images); err != nil {
		if os.Getenv("ACTORFEED_REQUIRE_DATASETS") != "" {
			t.Fatalf("Fashion-MNIST required: %v", err)
		}
		t.Skip("Fashion-MNIST not installed")
	}
	specs := []readers.SlotSpec{
		{Name: "image", Shape: tensor.Shape{1, 28, 28}, DType: tensor.Uint8},
		{Name: "label", Shape: tensor.Shape{1}, DType: tensor.Uint8},
	}
	r, err := readers.Open(images, readers.OpenOptions{Slots: specs})
	require.NoError(t, err)
	b := readers.Batch(readers.Shuffle(r, 500, 1), 128, false)
	n, batches := 0, 0
	for batch, err := range readers.All(context.Background(), b) {
		require.NoError(t, err)
		require.Equal(t, batch[0].Rows(), batch[1].Rows())
		n += batch[0].Rows()
		batches++
	}
	assert.Equal(t, 10000, n)
	assert.Equal(t, 79, batches)
	require.NoError(t, b.Close())
}

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	// Write 10 instances of (x [1,2] float32, y [1] int64).
	path := filepath.Join(dir, "train.recordio")
	f, _ := os.Create(path)
	w, _ := recordio.NewWriter(f, recordio.WriterOptions{Compressor: recordio.Snappy})
	for i := range 10 {
		rec, _ := tensor.Encode(tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{float32(i), float32(-i)})},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i % 2)})},
		})
		_ = w.Write(rec)
	}
	_ = w.Close()
	_ = f.Close()

	// Read it shuffled in batches of 4, two passes.
	r, err := readers.Open("recordio:"+path, readers.OpenOptions{})
	if err != nil {
		panic(err)
	}
	pipeline := readers.MultiPass(readers.Batch(readers.Shuffle(r, 10, 42), 4, false), 2)
	defer pipeline.Close()
	for batch, err := range readers.All(context.Background(), pipeline) {
		if err != nil {
			panic(err)
		}
		fmt.Println(batch[0].Shape(), batch[1].Shape())
	}
	// Output:
	// [4,2] [4]
	// [4,2] [4]
	// [2,2] [2]
	// [4,2] [4]
	// [4,2] [4]
	// [2,2] [2]
}

func labelOf(t *testing.T, s tensor.Slots) int64 {
	t.Helper()
	v, err := tensor.View[int64](s[1].Tensor)
	require.NoError(t, err)
	return v[0]
}

func TestRecordFileSeek(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seek.recordio")
	writeInstances(t, path, 100, recordio.NoCompression)
	r, err := readers.OpenRecordFile(path)
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	for _, rec := range []int{0, 1, 37, 99, 5} {
		require.NoError(t, r.Seek(rec))
		s, err := r.Next(ctx)
		require.NoError(t, err)
		require.EqualValues(t, rec, labelOf(t, s), "seek to %d", rec)
	}
	require.NoError(t, r.Seek(100))
	_, err = r.Next(ctx)
	require.ErrorIs(t, err, io.EOF)
	require.Error(t, r.Seek(101))
}

func TestRecordFileSkipCorruptChunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skip.recordio")
	writeInstances(t, path, 100, recordio.NoCompression)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	fh, err := os.Open(path)
	require.NoError(t, err)
	x, err := recordio.LoadIndex(fh, int64(len(data)), path)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	bad := x.Chunks[1]
	data[bad.Offset+recordio.HeaderSize] ^= 0x55
	require.NoError(t, os.WriteFile(path, data, 0o644))

	r, err := readers.OpenRecordFile(path)
	require.NoError(t, err)
	defer r.Close()
	var labels []int64
	skipped := 0
	for {
		s, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			require.ErrorIs(t, err, format.ErrCorrupt)
			n, ok := r.SkipCorrupt()
			require.True(t, ok)
			skipped += n
			continue
		}
		labels = append(labels, labelOf(t, s))
	}
	require.Equal(t, int(bad.NumRecords), skipped)
	require.Len(t, labels, 100-skipped)
	require.EqualValues(t, bad.FirstRecord+int(bad.NumRecords), labels[bad.FirstRecord], "reading goes on after the bad chunk")
}

// A header damaged after its file was indexed (in flight, or on disk since)
// says nothing about where the records are: a reader that sought with
// the index goes by it, losing that chunk's records by the index and
// going on at the next chunk at the index's record numbers. Before, a
// flipped record count or compressor stopped a reader that skipped
// corrupt chunks, or would have renumbered every record after it.
func TestSkipGoesByTheIndexPastAHeaderDamagedSinceIndexing(t *testing.T) {
	for field, flip := range map[string]int64{"compressor": 8, "records": 19, "size": 15, "magic": 0} {
		t.Run(field, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.recordio")
			writeInstances(t, path, 100, recordio.NoCompression)
			r, err := readers.OpenRecordFile(path)
			require.NoError(t, err)
			defer r.Close()
			x, err := r.Index()
			require.NoError(t, err)
			bad := x.Chunks[1]
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data[bad.Offset+flip] ^= 0x55
			require.NoError(t, os.WriteFile(path, data, 0o644))

			require.NoError(t, r.SeekIndexed(x, 0))
			var labels []int64
			skipped := 0
			for {
				s, err := r.Next(t.Context())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					require.ErrorIs(t, err, format.ErrCorrupt)
					n, ok := r.SkipCorrupt()
					require.True(t, ok, "%v", err)
					skipped += n
					continue
				}
				require.EqualValues(t, len(labels)+skipped, r.Position().Record, "record numbers stay the index's")
				labels = append(labels, labelOf(t, s))
			}
			require.Equal(t, int(bad.NumRecords), skipped)
			require.Len(t, labels, 100-skipped)
			require.EqualValues(t, bad.FirstRecord+int(bad.NumRecords), labels[bad.FirstRecord])
		})
	}
}

// countingReaderAt counts reads, to see what a seek costs.
type countingReaderAt struct {
	f     *os.File
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.f.ReadAt(p, off)
}

func TestSeekIndexedReadsNoHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.recordio")
	writeInstances(t, path, 400, recordio.NoCompression)
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	st, err := fh.Stat()
	require.NoError(t, err)

	cr := &countingReaderAt{f: fh}
	r := readers.NewRecordFile(cr, st.Size(), path, nil)
	x, err := r.Index()
	require.NoError(t, err)
	require.Greater(t, len(x.Chunks), 10)
	headers := cr.reads
	require.Equal(t, len(x.Chunks)+2*2, headers, "the index reads every chunk header, and the two markers' headers and payloads")

	cr.reads = 0
	again := readers.NewRecordFile(cr, st.Size(), path, nil)
	require.NoError(t, again.SeekIndexed(x, 150))
	item, err := again.Next(t.Context())
	require.NoError(t, err)
	require.Less(t, cr.reads, 4, "seeking with a kept index reads the target chunk, not every header")
	want, err := readers.OpenRecordFile(path)
	require.NoError(t, err)
	defer want.Close()
	require.NoError(t, want.Seek(150))
	w, err := want.Next(t.Context())
	require.NoError(t, err)
	require.True(t, w.Equal(item))
}

// Records that decode but are not one instance ([0]-shaped, rank 0, no
// slots, slots that disagree) failed later as "1 ids for 0 instances", an
// error that named no file and that --on-corrupt skip could not skip. They
// are corrupt records, named where they are, and skippable one by one.
func TestRecordThatIsNotOneInstanceIsCorrupt(t *testing.T) {
	bad := map[string]tensor.Slots{
		"[0]-shaped":     {{Tensor: tensor.MustFromSlice(tensor.Shape{0}, []int64{})}},
		"rank 0":         {{Tensor: tensor.MustFromSlice(tensor.Shape{}, []int64{7})}},
		"no slots":       {},
		"two rows":       {{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []int64{1, 2})}},
		"slots disagree": {{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{1})}, {Tensor: tensor.MustFromSlice(tensor.Shape{2}, []int64{1, 2})}},
	}
	for name, rec := range bad {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.recordio")
			_, err := readers.WriteRecordFile(path, recordio.WriterOptions{}, readers.Samples(3, func(i int) (tensor.Slots, error) {
				return []tensor.Slots{item(1), rec, item(3)}[i], nil
			}))
			require.NoError(t, err)
			r, err := readers.OpenRecordFile(path)
			require.NoError(t, err)
			defer r.Close()
			_, err = r.Next(t.Context())
			require.NoError(t, err)
			_, err = r.Next(t.Context())
			require.ErrorIs(t, err, format.ErrCorrupt)
			var fe *format.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, 1, fe.Record)
			assert.Equal(t, path, fe.File)
			n, ok := r.SkipCorrupt()
			require.True(t, ok)
			require.Equal(t, 1, n)
			got, err := r.Next(t.Context())
			require.NoError(t, err)
			require.True(t, got.Equal(item(3)), "reading goes on after the skipped record")
		})
	}
}
