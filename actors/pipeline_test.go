package actors_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
)

func TestFilesBatchOnePass(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 100, 256)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 16}}, actors.Options{System: sys})
	require.NoError(t, err)
	l := drain(t, ctx, p)
	requireExactlyOnce(t, allIDs(3, 100), l.ids)
	closeAndCheck(t, p, sys)
}

// A reader of Next that gives every item back (Recycle) gets batches made
// in their storage, with the same ids and data as without; an item it
// keeps is never written over.
func TestRecycleAfterNext(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 300, 256)
	read := func(recycle bool) ([][][]uint64, actors.Stats) {
		p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8})
		require.NoError(t, err)
		var passes [][][]uint64
		var kept []actors.Item
		for pass := range 2 {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			var ids [][]uint64
			readPass(t, ctx, p, func(it actors.Item) {
				checkAligned(t, it)
				ids = append(ids, slices.Clone(it.IDs))
				if recycle && it.Seq%7 != 3 {
					p.Recycle(it)
				} else {
					kept = append(kept, it)
				}
			})
			passes = append(passes, ids)
		}
		for _, it := range kept {
			checkAligned(t, it)
		}
		st := p.Stats()
		closeAndCheck(t, p, sharedSys)
		return passes, st
	}
	want, st := read(false)
	require.Zero(t, st.Recycled)
	got, st := read(true)
	require.Equal(t, want, got)
	require.Positive(t, st.Recycled, "batches were made in the storage given back")
}

// An actor system is kept for as long as its pipelines run, and the
// collector marks everything it holds on every cycle: protoactor's own
// process registry is 1,024 maps of 32 shards (66,000 objects, 2.75 MB).
// NewSystem's holds a few, and still finds the system's own processes and
// a pipeline's actors.
func TestNewSystemHoldsLittle(t *testing.T) {
	const n = 8
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	systems := make([]*actor.ActorSystem, n)
	for i := range systems {
		systems[i] = actors.NewSystem()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSystem := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	require.Less(t, perSystem, int64(256<<10), "live heap per system, in bytes")
	for _, sys := range systems[1:] {
		sys.Shutdown()
	}

	sys := systems[0]
	defer sys.Shutdown()
	for _, id := range []string{"deadletter", "eventstream"} {
		_, ok := sys.ProcessRegistry.GetLocal(id)
		require.True(t, ok, "the system's %s process", id)
	}
	p, err := actors.New([]actors.Stage{actors.Files{Paths: testutil.WriteFiles(t, 2, 50, 16), Threads: 2}, actors.Batch{Size: 8}}, actors.Options{System: sys})
	require.NoError(t, err)
	require.NotEmpty(t, registered.Actors(sys))
	l := drain(t, testutil.Context(t), p)
	requireExactlyOnce(t, allIDs(2, 50), l.ids)
	closeAndCheck(t, p, sys)
}
