package actors_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// Lanes spread the batch and map stages over the cores, and the batches
// are those of one lane, pass after pass, whatever the lanes, readers and
// timing: with windows that align with the batches and windows that do not
// (50 and 16), with maps in the lanes, without a shuffle, and with the
// last, short batch dropped.
func TestLanesDoNotChangeTheOrder(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 16, 40, 300)
	identity := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	chains := map[string][]actors.Stage{
		"window 50":  ordered(paths, 4),
		"window 64":  {actors.Files{Paths: paths, Threads: 4}, actors.Shuffle{Window: 64, Seed: 7}, actors.Batch{Size: 16}},
		"maps":       ordered(paths, 4, actors.XMap{Fn: identity, Workers: 3}, actors.Map{Fn: identity}),
		"unshuffled": {actors.Files{Paths: paths, Threads: 4}, actors.Batch{Size: 16}},
		// 640 records: the last of 27 batches is short, kept by the lanes
		// and dropped by the merge.
		"drop last": {actors.Files{Paths: paths, Threads: 4}, actors.Shuffle{Window: 64, Seed: 7}, actors.Batch{Size: 24, DropLast: true}},
	}
	for name, stages := range chains {
		run := func(lanes int, seed uint64) [][][]uint64 {
			p, err := actors.New(stages, actors.Options{System: sharedSys, Open: jittery(seed), GroupSize: 8, Lanes: lanes})
			require.NoError(t, err)
			passes := passBatches(t, ctx, p, 2)
			closeAndCheck(t, p, sharedSys)
			requireLanes(t, p, lanes)
			return passes
		}
		want := run(1, 1)
		var all []uint64
		for _, b := range want[0] {
			all = append(all, b...)
		}
		if name == "drop last" {
			require.Len(t, want[0], 26)
		} else {
			requireExactlyOnce(t, allIDs(16, 40), all)
		}
		for _, lanes := range []int{2, 3, 7} {
			require.Equal(t, want, run(lanes, uint64(lanes)), "%s: %d lanes", name, lanes)
		}
	}
}

// requireLanes fails unless, with lanes, a merge stage merged items that
// several lanes made: the deal stage takes turns item by item.
func requireLanes(t *testing.T, p *actors.Pipeline, lanes int) {
	t.Helper()
	busy, merged := map[string]bool{}, int64(0)
	for _, st := range p.StageStats() {
		if lane, _, ok := strings.Cut(st.Stage, "/"); ok && strings.HasPrefix(lane, "lane-") && st.Items > 0 && st.Kind != actors.KindFileReader {
			busy[lane] = true
		}
		if st.Kind == actors.KindMerge {
			merged += st.Items
		}
	}
	if lanes == 1 {
		require.Empty(t, busy)
		require.Zero(t, merged)
		return
	}
	require.GreaterOrEqual(t, len(busy), 2, "lanes that made items")
	require.Positive(t, merged)
}

// runLanes runs two passes of files -> shuffle -> xmap -> batch -> double
// buffer on n devices over lanes lanes, and returns what each device
// stepped, in order. Batch storage is recycled (deviceStep checks every
// value).
func runLanes(t *testing.T, paths []string, lanes, n int, inject faults.Injector) ([][]uint64, actors.Stats) {
	t.Helper()
	ctx := testutil.Context(t)
	sys := actors.NewSystem()
	var devMu sync.Mutex
	order := make([][]uint64, n)
	stages := []actors.Stage{actors.Files{Paths: paths, Threads: 3}, actors.Shuffle{Window: 48, Seed: 7},
		actors.XMap{Fn: negate, Workers: 2}, actors.Batch{Size: 16}, actors.DoubleBuffer{Window: 2}}
	p, err := actors.NewDevices(stages, actors.Devices{N: n, Step: deviceStep(&devMu, order, -1), Recycle: true},
		actors.Options{System: sys, Faults: inject, GroupSize: 8, Lanes: lanes})
	require.NoError(t, err)
	for pass := range 2 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		require.NoError(t, p.Run(ctx))
	}
	st := p.Stats()
	closeAndCheck(t, p, sys)
	return order, st
}

// A panic in any stage of any lane, in the merge stage or downstream,
// loses and duplicates nothing: every device steps the batches of the
// fault-free run with one lane, in its order.
func TestLanesExactlyOnceUnderPanics(t *testing.T) {
	const files, records, devices, lanes = 3, 120, 2, 3
	paths := testutil.WriteFiles(t, files, records, 200)
	want, _ := runLanes(t, paths, 1, devices, nil)
	var all []uint64
	for _, ids := range want {
		all = append(all, ids...)
	}
	requireExactlyOnce(t, append(allIDs(files, records), allIDs(files, records)...), all)
	got, st := runLanes(t, paths, lanes, devices, nil)
	require.Equal(t, want, got, "lanes without faults")
	require.Positive(t, st.Recycled, "batches were made in recycled storage")
	kinds := []string{actors.KindFileReader, actors.KindFiles, actors.KindShuffle, actors.KindXMap, actors.KindBatch,
		actors.KindDeal, actors.KindMerge, actors.KindDoubleBuffer, actors.KindDevice}
	for _, kind := range kinds {
		for _, n := range []int64{1, 2, 3, 5, 8, 13, 21} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				got, st := runLanes(t, paths, lanes, devices, faults.PanicAt{Kind: kind, N: n})
				require.Positive(t, st.Restarts, "the fault fired")
				require.Equal(t, want, got, "the devices' batches differ from the fault-free run's")
			})
		}
	}
}

// With lanes, memory stays bounded, and K lanes hold at most K times what
// one does: each lane's batch stage holds its unsent buffer, and the merge
// stage queues its link's window from each lane, while the devices are far
// slower than the readers, so that every buffer fills.
func TestLanesBoundLiveBatches(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 2000, 4096)
	const devices, prefetch, batch, group, window = 2, 2, 16, 32, 32
	sys := actors.NewSystem()
	peak := map[int]int{}
	for _, lanes := range []int{1, 3} {
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: window, Seed: 1}, actors.Batch{Size: batch},
			actors.DoubleBuffer{Window: prefetch}}, actors.Devices{N: devices, StepTime: time.Millisecond},
			actors.Options{System: sys, GroupSize: group, Lanes: lanes})
		require.NoError(t, err)
		require.NoError(t, p.Run(ctx))
		st := p.Stats()
		require.Equal(t, lanes, p.Lanes())
		closeAndCheck(t, p, sys)
		total := 0
		for _, d := range st.Devices {
			total += d.Instances
		}
		require.Equal(t, 6000, total)
		// docs/memory.md: per lane, the batch stage's unsent buffer
		// (Capacity, overshot by Window * GroupSize/batch); with lanes,
		// at the merge stage its link's Window per lane and Capacity
		// unsent; then the double buffer and the devices.
		const capacity, linkWindow = 2, 2
		queue := max(prefetch, actors.MinConsumerQueue)
		bound := lanes*(capacity+linkWindow*group/batch) + devices*prefetch + devices*prefetch + devices*queue
		if lanes > 1 {
			bound += lanes*linkWindow + capacity
		}
		require.Positive(t, st.PeakLiveBatches)
		require.LessOrEqual(t, st.PeakLiveBatches, bound)
		peak[lanes] = st.PeakLiveBatches
		t.Logf("%d lanes: peak live batches %d, bound %d", lanes, st.PeakLiveBatches, bound)
	}
	require.LessOrEqual(t, peak[3], 3*peak[1], "3 lanes hold at most 3 times what one does")
}

// The merge stage holds Capacity unsent items. With Capacity 1 it merged
// one item, sent it, and waited for a message that the items queued from
// its lanes never bring: the pass hung (sim seed 204).
func TestLanesMergeGoesOnWithCapacityOne(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 66, 4000)
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 6}, actors.DoubleBuffer{Window: 2}},
		actors.Devices{N: 2}, actors.Options{System: sys, Capacity: 1, ReaderWindow: 4, Lanes: 2})
	require.NoError(t, err)
	for pass := range 3 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		require.NoError(t, p.Run(ctx))
	}
	require.Equal(t, 3*66, p.Stats().Devices[0].Instances+p.Stats().Devices[1].Instances)
	closeAndCheck(t, p, sys)
}

// countedOpen is an Options.Open that counts the bytes read of paths in
// read, and the bytes the files hold.
func countedOpen(t *testing.T, paths []string) (open func(context.Context, string) (readers.Reader, error), read *atomic.Int64, size int64) {
	t.Helper()
	sizes := map[string]int64{}
	for _, p := range paths {
		st, err := os.Stat(p)
		require.NoError(t, err)
		sizes[p], size = st.Size(), size+st.Size()
	}
	read = &atomic.Int64{}
	open = func(ctx context.Context, entry string) (readers.Reader, error) {
		fh, err := os.Open(entry)
		if err != nil {
			return nil, err
		}
		return readers.NewRecordFile(countedFile{f: fh, ctx: ctx, read: read}, sizes[entry], entry, fh), nil
	}
	return open, read, size
}

// Lanes share the readers and the order's assembly: a pass reads about
// the files' bytes, as in one lane. (When each lane read its own stretches
// of the order, a window or chunk that a stretch ended inside was read
// twice.)
func TestLanesReadOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 2000, 2000)
	open, read, size := countedOpen(t, paths)
	files := actors.Files{Paths: paths, Threads: 4}
	for name, stages := range map[string][]actors.Stage{
		"shuffled":   {files, actors.Shuffle{Window: 64, Seed: 3}, actors.Batch{Size: 16}},
		"unshuffled": {files, actors.Batch{Size: 16}},
	} {
		for _, lanes := range []int{1, 3} {
			p, err := actors.New(stages, actors.Options{System: sharedSys, Open: open, Lanes: lanes})
			require.NoError(t, err)
			read.Store(0)
			require.Len(t, readPass(t, ctx, p, nil), 8000)
			closeAndCheck(t, p, sharedSys)
			require.LessOrEqual(t, read.Load(), size+size/20, "%s, %d lanes: a pass reads about the files' %d bytes", name, lanes, size)
		}
	}
}
