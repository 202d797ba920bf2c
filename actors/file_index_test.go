package actors_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/tensor"
)

// A pipeline with an IndexCache reads the batches of one without it; the
// next pipeline over the same files takes every index from the cache, and a
// file rewritten since is indexed again, its new records read.
func TestIndexCacheServesUnchangedFilesOnly(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 120, 40)
	read := func(opts actors.Options) [][][]uint64 {
		p, err := actors.New(serviceChain(paths), opts)
		require.NoError(t, err)
		defer func() { require.NoError(t, p.Close()) }()
		return passBatches(t, ctx, p, 2)
	}
	want := read(actors.Options{GroupSize: 8})
	cache := actors.NewIndexCache(0)
	require.Equal(t, want, read(actors.Options{GroupSize: 8, Indexes: cache}))
	require.Zero(t, cache.Hits())
	require.Equal(t, want, read(actors.Options{GroupSize: 8, Indexes: cache}))
	require.EqualValues(t, len(paths), cache.Hits(), "every index from the cache")

	testutil.WriteRecords(t, paths[1], 40, 200, func(r int) tensor.Slots { return testutil.Sample(1, r) })
	want = read(actors.Options{GroupSize: 8})
	require.Equal(t, want, read(actors.Options{GroupSize: 8, Indexes: cache}), "the rewritten file's 200 records")
	require.EqualValues(t, 2*len(paths)-1, cache.Hits(), "all but the rewritten file from the cache")
}

// A cache of one file forgets the others: the pipeline still reads them.
func TestIndexCacheKeepsItsLimit(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 60, 40)
	cache := actors.NewIndexCache(1)
	var first [][][]uint64
	for range 3 {
		p, err := actors.New(serviceChain(paths), actors.Options{GroupSize: 8, Indexes: cache})
		require.NoError(t, err)
		got := passBatches(t, ctx, p, 1)
		require.NoError(t, p.Close())
		if first == nil {
			first = got
		}
		require.Equal(t, first, got)
	}
	require.LessOrEqual(t, cache.Hits(), int64(2), "at most one file kept from one pipeline to the next")
}

// A worker indexes its job's files once, not once a task: the tasks after
// the first two (which may run at once) find every file's index in its
// cache.
func TestServiceWorkerIndexesFilesOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 8, 100, 40)
	p, w := inSystemService(t, paths, actors.Options{})
	passBatches(t, ctx, p, 2)
	require.NoError(t, p.Close())
	st := w.Stats()
	require.Greater(t, st.Tasks, int64(4), "enough tasks to tell")
	require.GreaterOrEqual(t, st.IndexHits, (st.Tasks-2)*int64(len(paths)), "%d tasks over %d files", st.Tasks, len(paths))
}
