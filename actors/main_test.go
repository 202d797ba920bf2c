package actors_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// The tests decode and index into a cache of their own, not the user's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testutil.OwnDir{M: m, Env: readers.DecodeCacheEnv})
}

// ledger collects what a pipeline delivered.
type ledger struct {
	ids   []uint64
	items int
}

// checkAligned fails unless every instance's value slot matches its id: data
// and ids travelled together.
func checkAligned(t testing.TB, it actors.Item) {
	t.Helper()
	vals, err := tensor.View[int64](it.Slots[0].Tensor)
	require.NoError(t, err)
	require.Len(t, vals, len(it.IDs))
	for i, id := range it.IDs {
		f, r := messages.SplitID(id)
		require.Equal(t, int64(f*1_000_000+r), vals[i], "instance %d", i)
	}
}

// drain reads a pass to its end.
func drain(t testing.TB, ctx context.Context, p *actors.Pipeline) ledger {
	t.Helper()
	var l ledger
	l.ids = readPass(t, ctx, p, func(it actors.Item) {
		checkAligned(t, it)
		require.Equal(t, l.items, it.Seq, "items come in pass order")
		l.items++
	})
	return l
}

// readPass reads a pass to its end, failing on any error, calls each (if
// set) on every item and returns the ids in the order they came.
func readPass(t testing.TB, ctx context.Context, p *actors.Pipeline, each func(actors.Item)) []uint64 {
	t.Helper()
	var ids []uint64
	for {
		it, err := p.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids
		}
		require.NoError(t, err)
		if each != nil {
			each(it)
		}
		ids = append(ids, it.IDs...)
	}
}

// allIDs is every sample id of k files of n records.
func allIDs(k, n int) []uint64 {
	var ids []uint64
	for f := range k {
		for r := range n {
			ids = append(ids, messages.SampleID(f, r))
		}
	}
	return ids
}

// requireExactlyOnce fails unless got holds each id of want exactly once.
func requireExactlyOnce(t testing.TB, want, got []uint64) {
	t.Helper()
	g := slices.Clone(got)
	slices.Sort(g)
	w := slices.Clone(want)
	slices.Sort(w)
	require.Equal(t, len(w), len(g), "samples delivered")
	require.Equal(t, w, g)
}

// closeAndCheck closes p and fails if any actor of it is left.
func closeAndCheck(t testing.TB, p *actors.Pipeline, sys *actor.ActorSystem) {
	t.Helper()
	require.NoError(t, p.Close())
	if sys != nil {
		require.Empty(t, registered.Actors(sys), "actors left in the registry")
	}
}
