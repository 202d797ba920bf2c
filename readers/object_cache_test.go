package readers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/tensor"
)

// With the object cache on, an object is fetched whole once: later opens,
// by this store or another (a later process), look it up and read its
// copy, asking nothing else of the store. A replaced object is a new
// version, fetched anew; the old version's copy is never read for it.
func TestObjectCacheFetchesAnObjectOnce(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(readers.ObjectCacheEnv, cache)
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	newStore := func() *objstore.Store {
		s, err := objstore.New(t.Context(), objstore.Options{Endpoint: srv.Endpoint, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey})
		require.NoError(t, err)
		return s
	}
	dir := t.TempDir()
	rio := testutil.WriteRecords(t, filepath.Join(dir, "part-0.recordio"), 4096, 3000,
		func(r int) tensor.Slots { return testutil.Sample(0, r) })
	shard := filepath.Join(dir, "shard-0.tar")
	testutil.PythonShard(t, shardFiles(t, 300), shard)

	for _, c := range []struct{ local, url string }{
		{rio, "s3://data/part-0.recordio"},
		{shard, "s3://data/shard-0.tar"},
	} {
		b, err := os.ReadFile(c.local)
		require.NoError(t, err)
		etag := srv.Put(t, "data", filepath.Base(c.local), b)
		want := allSamples(t, c.local)
		first := newStore()
		requireSameSamples(t, want, openAll(t, first, c.url, etag), c.url)
		_, fetched := first.Stats()
		require.GreaterOrEqual(t, fetched, int64(len(b)), "%s: fetched whole", c.url)

		later := newStore()
		requireSameSamples(t, want, openAll(t, later, c.url, etag), c.url+", again")
		requests, bytes := later.Stats()
		require.Zero(t, bytes, "%s: read from its copy", c.url)
		require.Equal(t, int64(1), requests, "%s: the look-up alone", c.url)
	}
	require.Len(t, listDir(t, cache), 2, "a copy an object, nothing left beside them")

	other := testutil.WriteRecords(t, filepath.Join(dir, "other.recordio"), 4096, 500,
		func(r int) tensor.Slots { return testutil.Sample(1, r) })
	b, err := os.ReadFile(other)
	require.NoError(t, err)
	etag := srv.Put(t, "data", "part-0.recordio", b)
	requireSameSamples(t, allSamples(t, other), openAll(t, newStore(), "s3://data/part-0.recordio", etag), "the replaced object")
	require.Len(t, listDir(t, cache), 3, "the new version's copy beside the old")
}

// openAll reads every sample of the object at url through s, checking
// the version it reads.
func openAll(t *testing.T, s *objstore.Store, url, etag string) []tensor.Slots {
	t.Helper()
	r, err := readers.Open(url, readers.OpenOptions{Objects: s})
	require.NoError(t, err, url)
	defer r.Close()
	require.Equal(t, etag, r.(interface{ Version() string }).Version(), url)
	var out []tensor.Slots
	for s, err := range readers.All(t.Context(), r) {
		require.NoError(t, err, url)
		out = append(out, s)
	}
	return out
}

// A fetch that the store fails past its retries fails the open, naming
// the object and the cache, and leaves no part of a copy behind; the
// next open fetches it whole. A cache that cannot hold a copy (its
// directory cannot be made) leaves the object read from the store.
func TestObjectCacheFetchFailsWhole(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(readers.ObjectCacheEnv, cache)
	srv := s3servertest.Start(t)
	srv.Bucket(t, "data")
	p := s3servertest.NewProxy(t, srv)
	store, err := objstore.New(t.Context(), objstore.Options{Endpoint: p.URL, AccessKey: s3server.AccessKey,
		SecretKey: s3server.SecretKey, Attempts: 2, Backoff: time.Millisecond})
	require.NoError(t, err)
	rio := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "part-0.recordio"), 4096, 3000,
		func(r int) tensor.Slots { return testutil.Sample(0, r) })
	b, err := os.ReadFile(rio)
	require.NoError(t, err)
	etag := srv.Put(t, "data", "part-0.recordio", b)
	url := "s3://data/part-0.recordio"

	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodGet && r.Header.Get("Range") != "bytes=0-1048575" {
			return s3server.Fault{Cut: 1000} // every read past the first MiB
		}
		return s3server.Fault{}
	})
	_, err = readers.Open(url, readers.OpenOptions{Objects: store})
	require.ErrorContains(t, err, url)
	require.ErrorContains(t, err, readers.ObjectCacheEnv)
	require.Empty(t, listDir(t, cache), "no part of a copy")

	p.SetFaults(nil)
	want := allSamples(t, rio)
	requireSameSamples(t, want, openAll(t, store, url, etag), "fetched after the faults")
	require.Len(t, listDir(t, cache), 1)

	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))
	t.Setenv(readers.ObjectCacheEnv, filepath.Join(notADir, "cache"))
	_, before := store.Stats()
	requireSameSamples(t, want, openAll(t, store, url, etag), "read from the store")
	_, after := store.Stats()
	require.Positive(t, after-before, "read from the store")
}
