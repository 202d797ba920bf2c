package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

var errNoImage = errors.New("not an image")

// badSampleMap doubles slot 0 into a tensor of its own and passes slot 1
// on, as a decode map makes its images and keeps the labels; the samples
// bad says are bad it cannot read (format.BadSamples). Its panicAt-th call
// panics, before it reads anything, so that the stage restarts.
func badSampleMap(bad func(id uint64) bool, panicAt int64) actors.SampleMapFunc {
	var calls atomic.Int64
	return func(s actors.Samples, slots tensor.Slots) (tensor.Slots, error) {
		if calls.Add(1) == panicAt {
			panic("the map fails once")
		}
		v, err := tensor.View[int64](slots[0].Tensor)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(v))
		var rows format.BadSamples
		for i, x := range v {
			out[i] = 2 * x
			if bad(s.IDs[i]) {
				rows.Rows = append(rows.Rows, i)
				rows.Errs = append(rows.Errs, fmt.Errorf("%s: %w", s.Name(s.IDs[i]), errNoImage))
			}
		}
		res := tensor.Slots{{Tensor: tensor.MustFromSlice(slots[0].Shape(), out)}, slots[1]}
		if len(rows.Rows) > 0 {
			return res, &rows
		}
		return res, nil
	}
}

// Under the skip policy the samples a map cannot read leave their batches,
// the other rows stay with their ids, and each is counted once in Skipped
// and listed in Corrupt: with lanes, in an xmap, before the batch stage
// (an item of several batches), on a padded rank's share, and across a
// restart of the map stage (its second call panics).
func TestMapsDropTheSamplesTheyCannotRead(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 16)
	bad := func(id uint64) bool { _, r := messages.SplitID(id); return r%13 == 5 }
	want := goodIDs(2, 100, bad)
	files := actors.Files{Paths: paths, Threads: 2}
	shuffle := actors.Shuffle{Window: 50, Seed: 7}
	for _, c := range []struct {
		name   string
		stages func(fn actors.SampleMapFunc) []actors.Stage
		lanes  int
	}{
		{"after the batch stage", func(fn actors.SampleMapFunc) []actors.Stage {
			return []actors.Stage{files, shuffle, actors.Batch{Size: 16}, actors.Map{Samples: fn}}
		}, 1},
		{"in lanes", func(fn actors.SampleMapFunc) []actors.Stage {
			return []actors.Stage{files, shuffle, actors.Batch{Size: 16}, actors.Map{Samples: fn}}
		}, 2},
		{"in an xmap", func(fn actors.SampleMapFunc) []actors.Stage {
			return []actors.Stage{files, shuffle, actors.Batch{Size: 16}, actors.XMap{Samples: fn, Workers: 2}}
		}, 1},
		{"before the batch stage", func(fn actors.SampleMapFunc) []actors.Stage {
			return []actors.Stage{files, shuffle, actors.Map{Samples: fn}, actors.Batch{Size: 8}}
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sys := actors.NewSystem()
			p, err := actors.New(c.stages(badSampleMap(bad, 2)), actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt, Lanes: c.lanes})
			require.NoError(t, err)
			ids := readPass(t, ctx, p, func(it actors.Item) { checkDoubled(t, it) })
			requireExactlyOnce(t, want, ids)
			st := p.Stats()
			require.Equal(t, 1, st.Restarts)
			require.EqualValues(t, 200-len(want), st.Skipped, "each dropped sample counted once")
			require.Equal(t, 200-len(want), st.CorruptChunks)
			require.EqualValues(t, -1, st.Corrupt[0].Offset)
			require.ErrorIs(t, st.Corrupt[0].Err, errNoImage)
			require.Contains(t, st.Corrupt[0].Err.Error(), " of "+st.Corrupt[0].File)
			closeAndCheck(t, p, sys)
		})
	}
	t.Run("to devices", func(t *testing.T) {
		// Two lanes feed three devices: the count comes once through the
		// merge and reaches every device's end of the pass.
		var mu sync.Mutex
		var ids []uint64
		step := func(_ context.Context, it actors.Item) error {
			checkDoubled(t, it)
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, it.IDs...)
			return nil
		}
		sys := actors.NewSystem()
		p, err := actors.NewDevices([]actors.Stage{files, shuffle, actors.Batch{Size: 16}, actors.Map{Samples: badSampleMap(bad, 0)}},
			actors.Devices{N: 3, Step: step}, actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt, Lanes: 2})
		require.NoError(t, err)
		require.NoError(t, p.Run(ctx))
		requireExactlyOnce(t, want, ids)
		require.EqualValues(t, 200-len(want), p.Stats().Skipped)
		closeAndCheck(t, p, sys)
	})
	t.Run("a padded share", func(t *testing.T) {
		// Rank 2 of 3 pads its share with the epoch's first positions.
		sys := actors.NewSystem()
		p, err := actors.New([]actors.Stage{files, shuffle, actors.Batch{Size: 16}, actors.Map{Samples: badSampleMap(bad, 0)}},
			actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt, Shard: actors.Shard{Rank: 2, World: 3, Remainder: order.Pad}})
		require.NoError(t, err)
		padded := 0
		readPass(t, ctx, p, func(it actors.Item) {
			checkDoubled(t, it)
			require.LessOrEqual(t, it.Padding, len(it.IDs))
			for _, id := range it.IDs[len(it.IDs)-it.Padding:] {
				require.False(t, bad(id), "a bad sample dropped from the padding")
			}
			padded += it.Padding
		})
		require.Positive(t, padded)
		closeAndCheck(t, p, sys)
	})
}

// A batch whose every sample is dropped arrives with no rows, in its place.
func TestABatchOfBadSamplesArrivesEmpty(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 20, 4)
	bad := func(id uint64) bool { _, r := messages.SplitID(id); return r >= 8 && r < 12 }
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 1}, actors.Batch{Size: 4}, actors.Map{Samples: badSampleMap(bad, 0)}},
		actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt})
	require.NoError(t, err)
	var sizes []int
	readPass(t, ctx, p, func(it actors.Item) {
		checkDoubled(t, it)
		sizes = append(sizes, len(it.IDs))
	})
	require.Equal(t, []int{4, 4, 0, 4, 4}, sizes)
	require.EqualValues(t, 4, p.Stats().Skipped)
	closeAndCheck(t, p, sys)
}

// Without the skip policy a bad sample fails the pipeline, naming it.
func TestABadSampleFailsThePipelineByDefault(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 20, 4)
	bad := func(id uint64) bool { _, r := messages.SplitID(id); return r == 9 || r == 10 }
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 1}, actors.Batch{Size: 4}, actors.Map{Samples: badSampleMap(bad, 0)}},
		actors.Options{System: sys})
	require.NoError(t, err)
	for {
		if _, err = p.Next(ctx); err != nil {
			break
		}
	}
	require.ErrorContains(t, err, "record 9 of "+paths[0]+": not an image (and 1 more samples of the batch)")
	require.NoError(t, p.Close())
}

// goodIDs are the ids of k files of n records that bad does not name.
func goodIDs(k, n int, bad func(id uint64) bool) []uint64 {
	var good []uint64
	for _, id := range allIDs(k, n) {
		if !bad(id) {
			good = append(good, id)
		}
	}
	return good
}

// checkDoubled checks that an item's rows hold their samples, slot 0
// doubled by badSampleMap, slot 1 the label.
func checkDoubled(t *testing.T, it actors.Item) {
	t.Helper()
	v, err := tensor.View[int64](it.Slots[0].Tensor)
	require.NoError(t, err)
	labels, err := tensor.View[int32](it.Slots[1].Tensor)
	require.NoError(t, err)
	require.Len(t, v, len(it.IDs))
	require.Len(t, labels, len(it.IDs))
	for i, id := range it.IDs {
		f, r := messages.SplitID(id)
		require.Equal(t, 2*int64(f*1_000_000+r), v[i], "row %d", i)
		require.Equal(t, int32(r%10), labels[i], "row %d", i)
	}
}
