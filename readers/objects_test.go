package readers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// allSamples reads every sample of entry.
func allSamples(t *testing.T, entry string) []tensor.Slots {
	t.Helper()
	r, err := readers.Open(entry, readers.OpenOptions{})
	require.NoError(t, err, entry)
	defer r.Close()
	var out []tensor.Slots
	for s, err := range readers.All(t.Context(), r) {
		require.NoError(t, err, entry)
		out = append(out, s)
	}
	require.NotEmpty(t, out, entry)
	return out
}

func requireSameSamples(t *testing.T, want, got []tensor.Slots, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.True(t, want[i].Equal(got[i]), "%s: sample %d", what, i)
	}
}

// RecordIO files, WebDataset shards and TFRecord files read from objects
// as from the same files on disk: named by URL, bare or with a format,
// through a store that cuts bodies off and throttles.
func TestFormatsReadFromObjects(t *testing.T) {
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	p := s3servertest.NewProxy(t, srv)
	srv.Env(t, p.URL)
	p.SetFaults(s3servertest.Rhythm{Cut: 7, CutAt: 700, Throttle: 11}.Faults)

	rio := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "part-0.recordio"), 4096, 3000,
		func(r int) tensor.Slots { return testutil.Sample(0, r) })
	src, dir := shardFiles(t, 300), t.TempDir()
	shard := filepath.Join(dir, "shard-0.tar")
	testutil.PythonShard(t, src, shard)
	tf, tfgz := filepath.Join(dir, "part-0.tfrecord"), filepath.Join(dir, "part-0.tfrecord.gz")
	tfrecordFile(t, tf, 200)
	tfrecordFile(t, tfgz, 200)

	for _, c := range []struct {
		local, url string
		n          uint64
	}{
		{rio, "s3://data/rio/part-0.recordio", 3000},
		{"wds:" + shard, "wds:s3://data/wds/shard-0.tar", 300},
		{shard, "s3://data/wds/shard-0.tar", 300},
		{tf, "s3://data/tf/part-0.tfrecord", 200},
		{tfgz, "s3://data/tf/part-0.tfrecord.gz", 200},
	} {
		local := strings.TrimPrefix(c.local, "wds:")
		_, path, err := readers.ParseEntry(c.url)
		require.NoError(t, err)
		u, err := objstore.ParseURL(path)
		require.NoError(t, err)
		b, err := os.ReadFile(local)
		require.NoError(t, err)
		srv.Put(t, u.Bucket, u.Key, b)
		if !strings.HasSuffix(c.url, ".tar") && !strings.HasSuffix(c.url, ".tfrecord") {
			// RecordIO seeks by its chunk index in the pipeline; a gzip'd
			// object is read forward.
			requireSameSamples(t, allSamples(t, c.local), allSamples(t, c.url), c.url)
			continue
		}
		for _, from := range []int{0, int(c.n) / 2} {
			requireSameSamples(t, entrySamples(t, c.local, from, c.n), entrySamples(t, c.url, from, c.n), c.url)
		}
	}
	require.Positive(t, p.Requests())

	// A reader whose slots are declared still says which version it reads,
	// which the pipeline pins a job to.
	r, err := readers.Open("s3://data/rio/part-0.recordio", readers.OpenOptions{Slots: []readers.SlotSpec{{}, {}}})
	require.NoError(t, err)
	defer r.Close()
	require.NotEmpty(t, r.(interface{ Version() string }).Version())
}

// An object that is not there, or a bucket, fails the open with one line
// naming the URL; IDX files are read from disk only, and say so.
func TestObjectsThatAreNotThere(t *testing.T) {
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	srv.Env(t, srv.Endpoint)
	for url, want := range map[string]error{
		"s3://data/none.recordio":   objstore.ErrNoObject,
		"s3://nodata/x.tar":         objstore.ErrNoBucket,
		"tfrecord:s3://data/none.x": objstore.ErrNoObject,
	} {
		_, err := readers.Open(url, readers.OpenOptions{})
		require.ErrorIs(t, err, want, url)
		require.NotContains(t, err.Error(), "\n")
	}
	_, err := readers.Open("s3://data/train-images-idx3-ubyte", readers.OpenOptions{})
	require.ErrorContains(t, err, "read from local disk only")
}

// A chunk that an index placed is read in one read, header and payload
// (a request each, on an object store); damage since the index was read
// is found as before.
func TestAnIndexedChunkIsOneRead(t *testing.T) {
	path := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "a.recordio"), 4096, 3000,
		func(r int) tensor.Slots { return testutil.Sample(0, r) })
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	c := &countingReaderAt{f: f}
	rf := readers.NewRecordFile(c, st.Size(), path, nil)
	x, err := rf.Index()
	require.NoError(t, err)
	require.Greater(t, len(x.Chunks), 3)
	chunk := x.Chunks[2]
	c.reads = 0
	require.NoError(t, rf.SeekIndexed(x, chunk.FirstRecord))
	s, err := rf.Next(t.Context())
	require.NoError(t, err)
	require.True(t, testutil.Sample(0, chunk.FirstRecord).Equal(s))
	require.Equal(t, 1, c.reads, "header and payload in one read")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[chunk.Offset+recordio.HeaderSize+10] ^= 0xff
	damaged := filepath.Join(t.TempDir(), "b.recordio")
	require.NoError(t, os.WriteFile(damaged, b, 0o644))
	g, err := os.Open(damaged)
	require.NoError(t, err)
	defer g.Close()
	rg := readers.NewRecordFile(g, st.Size(), damaged, nil)
	require.NoError(t, rg.SeekIndexed(x, chunk.FirstRecord))
	_, err = rg.Next(t.Context())
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "checksum")
}

// A gzip'd shard or TFRecord object is decoded once into the decode cache,
// and a raw shard's spans are kept there, by the object's version: a
// second reader that seeks into the object reads it neither whole nor
// forward, and says the version it reads. A replaced object is another
// version, read afresh.
func TestObjectsAreDecodedAndIndexedOnce(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	store, err := objstore.New(t.Context(), objstore.Options{Endpoint: srv.Endpoint, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey})
	require.NoError(t, err)
	src, dir := shardFiles(t, 300), t.TempDir()
	tar, tgz, tfgz := filepath.Join(dir, "s.tar"), filepath.Join(dir, "s.tar.gz"), filepath.Join(dir, "p.tfrecord.gz")
	testutil.PythonShard(t, src, tar)
	testutil.PythonShard(t, src, tgz)
	tfrecordFile(t, tfgz, 300)
	read := func(url string, from int) ([]tensor.Slots, string, time.Time) {
		r, err := readers.Open(url, readers.OpenOptions{Objects: store})
		require.NoError(t, err, url)
		defer r.Close()
		require.NoError(t, r.(interface{ Seek(int) error }).Seek(from), url)
		var out []tensor.Slots
		for s, err := range readers.All(t.Context(), r) {
			require.NoError(t, err, url)
			out = append(out, s)
		}
		return out, r.(interface{ Version() string }).Version(), r.(interface{ Modified() time.Time }).Modified()
	}
	for _, local := range []string{tgz, tfgz, tar} {
		b, err := os.ReadFile(local)
		require.NoError(t, err)
		url := "s3://data/" + filepath.Base(local)
		etag := srv.Put(t, "data", filepath.Base(local), b)
		want := entrySamples(t, local, 100, 300)
		got, version, written := read(url, 100)
		requireSameSamples(t, want, got, url)
		require.Equal(t, etag, version, url)
		require.WithinDuration(t, time.Now(), written, time.Hour, "%s: when the version read was written", url)

		_, before := store.Stats()
		got, version, _ = read(url, 100)
		_, after := store.Stats()
		requireSameSamples(t, want, got, url)
		require.Equal(t, etag, version, url)
		if local == tar {
			require.Less(t, after-before, int64(len(b))*3/4, "%s: the spans are not scanned again", url)
		} else {
			require.Less(t, after-before, int64(len(b))/10, "%s: the object is not read forward again", url)
		}
	}
	other := filepath.Join(dir, "other.tar.gz")
	testutil.PythonShard(t, shardFiles(t, 120), other)
	b, err := os.ReadFile(other)
	require.NoError(t, err)
	etag := srv.Put(t, "data", "s.tar.gz", b)
	got, version, _ := read("s3://data/s.tar.gz", 20)
	require.Equal(t, etag, version)
	requireSameSamples(t, entrySamples(t, other, 20, 120), got, "the replaced object")
}

// With the decode cache off, a gzip'd object is read forward, and a reader
// that seeks into it reads the samples there, as from the file on disk.
func TestAGzipObjectSeeksWithoutTheCache(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, "off")
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	srv.Env(t, srv.Endpoint)
	tgz := filepath.Join(t.TempDir(), "s.tar.gz")
	testutil.PythonShard(t, shardFiles(t, 300), tgz)
	b, err := os.ReadFile(tgz)
	require.NoError(t, err)
	srv.Put(t, "data", "s.tar.gz", b)
	fromSample := func(entry string, from int) []tensor.Slots {
		r, err := readers.Open(entry, readers.OpenOptions{})
		require.NoError(t, err, entry)
		defer r.Close()
		_, err = r.Next(t.Context())
		require.NoError(t, err, entry)
		require.NoError(t, r.(interface{ Seek(int) error }).Seek(from), entry)
		var got []tensor.Slots
		for s, err := range readers.All(t.Context(), r) {
			require.NoError(t, err, entry)
			got = append(got, s)
		}
		return got
	}
	want := fromSample(tgz, 100)
	require.Len(t, want, 200)
	requireSameSamples(t, want, fromSample("s3://data/s.tar.gz", 100), "from sample 100")
}

// A RecordIO object's chunk index, a request a chunk to build, is kept by
// the object's version: the next open reads it back and asks the store for
// the object's HEAD alone. A replaced object is indexed afresh, and so is
// one whose kept index is damaged.
func TestAnObjectsChunkIndexIsKept(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(readers.DecodeCacheEnv, cache)
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	store, err := objstore.New(t.Context(), objstore.Options{Endpoint: srv.Endpoint, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey})
	require.NoError(t, err)
	put := func(seed int) {
		// Chunks of 512 KiB: larger than a read's range, so that building
		// the index reads each header apart, as Fashion-MNIST's do.
		path := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "part.recordio"), 512<<10, 96,
			func(r int) tensor.Slots {
				img := make([]uint8, 64<<10)
				img[0], img[1] = uint8(seed), uint8(r)
				return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, len(img)}, img)}}
			})
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		srv.Put(t, "data", "part.recordio", b)
	}
	index := func() (*recordio.Index, int64) {
		before, _ := store.Stats()
		r, err := readers.Open("s3://data/part.recordio", readers.OpenOptions{Objects: store})
		require.NoError(t, err)
		defer r.Close()
		x, err := r.(interface {
			Index() (*recordio.Index, error)
		}).Index()
		require.NoError(t, err)
		after, _ := store.Stats()
		return x, after - before
	}
	put(1)
	built, asked := index()
	require.Greater(t, len(built.Chunks), 8)
	require.Greater(t, asked, int64(len(built.Chunks)), "a header read a chunk")
	kept, asked := index()
	require.Equal(t, built, kept)
	require.Equal(t, int64(1), asked, "the HEAD alone")

	put(2)
	other, asked := index()
	require.Greater(t, asked, int64(len(other.Chunks)), "the new version is indexed")
	require.NotEqual(t, built.Chunks[0].Checksum, other.Chunks[0].Checksum)

	files, err := filepath.Glob(filepath.Join(cache, "*.recordio-index"))
	require.NoError(t, err)
	require.Len(t, files, 2, "one index a version")
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		b[len(b)/2] ^= 1
		require.NoError(t, os.WriteFile(f, b, 0o644))
	}
	again, asked := index()
	require.Equal(t, other, again)
	require.Greater(t, asked, int64(len(other.Chunks)), "a damaged index is built again")
}
