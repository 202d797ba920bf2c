package actors_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/order"
)

// stepRank is one rank of a job with a global batch: its pipeline over
// paths in the global order, its batch its slice of a step.
func stepRank(t *testing.T, paths []string, shard actors.Shard, resume []actors.State) *actors.Pipeline {
	t.Helper()
	stages := []actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Shuffle{Global: true, Seed: 11}, actors.Batch{Size: shard.StepBatch()}}
	p, err := actors.New(stages, actors.Options{System: sharedSys, GroupSize: 8, Shard: shard, Resume: resume})
	require.NoError(t, err)
	return p
}

// jobSteps runs every rank of a world of shard's for up to n steps (-1:
// to the epoch's end), and gives each step's ids (sorted), each step's
// shares summed over the ranks, and the ranks' states after it. Each
// item's Index is its step of the epoch: from first on, first being
// where a resumed job's states stand.
func jobSteps(t *testing.T, ctx context.Context, paths []string, shard actors.Shard, resume []actors.State, first, n int) ([][]uint64, []float64, []actors.State) {
	t.Helper()
	var steps [][]uint64
	var shares []float64
	var states []actors.State
	for rank := range shard.World {
		shard.Rank = rank
		p := stepRank(t, paths, shard, resume)
		for k := 0; n < 0 || k < n; k++ {
			it, err := p.Next(ctx)
			if n < 0 && err != nil {
				break
			}
			require.NoError(t, err)
			checkGlobalRows(t, it)
			require.Equal(t, shard.StepBatch(), it.Instances, "rank %d step %d", rank, k)
			require.Equal(t, first+k, it.Index, "rank %d", rank)
			if k == len(steps) {
				steps, shares = append(steps, nil), append(shares, 0)
			}
			steps[k] = append(steps[k], it.IDs[:it.Instances-it.Padding]...)
			shares[k] += it.StepShare
		}
		st, err := p.State()
		require.NoError(t, err)
		states = append(states, *saved(t, st))
		closeAndCheck(t, p, sharedSys)
	}
	for _, s := range steps {
		slices.Sort(s)
	}
	return steps, shares, states
}

// wantSteps are the global steps of g samples of epoch 0 of the global
// order over files of sizes, as sorted ids.
func wantSteps(t *testing.T, g int, sizes ...int) [][]uint64 {
	ids := wantGlobal(t, 11, 0, sizes...)
	var out [][]uint64
	for k := 0; (k+1)*g <= len(ids); k++ {
		out = append(out, slices.Sorted(slices.Values(ids[k*g:(k+1)*g])))
	}
	return out
}

// With a global batch, step k is the same samples on any number of ranks,
// the ranks' batches differ by one at most, and each step's shares sum to
// one; the last partial step is dropped.
func TestGlobalBatchStepsAreTheSameOnAnyWorld(t *testing.T) {
	ctx := testutil.Context(t)
	paths := globalIDX(t, 300, 457)
	want := wantSteps(t, 10, 300, 457)
	for _, world := range []int{1, 2, 3, 4, 7} {
		got, shares, _ := jobSteps(t, ctx, paths, actors.Shard{World: world, GlobalBatch: 10}, nil, 0, -1)
		require.Equal(t, want, got, "world %d", world)
		for k, s := range shares {
			require.InDelta(t, 1, s, 1e-12, "world %d step %d", world, k)
		}
	}
}

// A job stopped between steps and resumed on another number of ranks, and
// again on another, delivers the uninterrupted run's steps; under Pad the
// last step is filled up and its shares still sum to one.
func TestGlobalBatchResizeKeepsTheSteps(t *testing.T) {
	ctx := testutil.Context(t)
	paths := globalIDX(t, 300, 457)
	want := wantSteps(t, 12, 300, 457)
	first, _, states := jobSteps(t, ctx, paths, actors.Shard{World: 2, GlobalBatch: 12}, nil, 0, 20)
	second, _, states := jobSteps(t, ctx, paths, actors.Shard{World: 3, GlobalBatch: 12}, states, 20, 17)
	rest, _, _ := jobSteps(t, ctx, paths, actors.Shard{World: 1, GlobalBatch: 12}, states, 37, -1)
	require.Equal(t, want, slices.Concat(first, second, rest))

	padded, shares, _ := jobSteps(t, ctx, paths, actors.Shard{World: 5, GlobalBatch: 12, Remainder: order.Pad}, nil, 0, -1)
	require.Len(t, padded, int(math.Ceil(757.0/12)))
	require.Equal(t, want, padded[:len(want)])
	require.Len(t, padded[len(want)], 757%12, "the padding is masked")
	for k, s := range shares {
		require.InDelta(t, 1, s, 1e-12, "step %d", k)
	}
}

// A global batch is refused where it cannot hold: a batch other than the
// rank's slice, a shuffle window (every rank would read it whole), fewer
// samples than ranks, and a state taken with another global batch.
func TestGlobalBatchRefusals(t *testing.T) {
	ctx := testutil.Context(t)
	paths := globalIDX(t, 100)
	shard := actors.Shard{Rank: 1, World: 3, GlobalBatch: 10}
	_, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Global: true}, actors.Batch{Size: 4}},
		actors.Options{System: sharedSys, Shard: shard})
	require.ErrorContains(t, err, "gives rank 1 batches of 3 samples, and the Batch stage batches 4")
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64}, actors.Batch{Size: 3}},
		actors.Options{System: sharedSys, Shard: shard})
	require.ErrorContains(t, err, "read whole by every rank")
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 1}},
		actors.Options{System: sharedSys, Shard: actors.Shard{World: 3, GlobalBatch: 2}})
	require.ErrorContains(t, err, "leaves a rank none")

	_, _, states := jobSteps(t, ctx, paths, actors.Shard{World: 2, GlobalBatch: 10}, nil, 0, 2)
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Global: true, Seed: 11}, actors.Batch{Size: 4}},
		actors.Options{System: sharedSys, Shard: actors.Shard{World: 2, GlobalBatch: 8}, Resume: states})
	require.ErrorContains(t, err, "global batch of 10 samples, and this job's is 8")
}
