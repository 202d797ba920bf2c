package actors_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// ordered is a pipeline in the order: shuffle windows of 50, batches of 16,
// over paths.
func ordered(paths []string, threads int, extra ...actors.Stage) []actors.Stage {
	st := []actors.Stage{actors.Files{Paths: paths, Threads: threads}, actors.Shuffle{Window: 50, Seed: 7}}
	return append(append(st, extra...), actors.Batch{Size: 16})
}

// batches reads a pass and returns its batches' ids.
func batches(t *testing.T, ctx context.Context, p *actors.Pipeline) [][]uint64 {
	t.Helper()
	var out [][]uint64
	readPass(t, ctx, p, func(it actors.Item) {
		checkAligned(t, it)
		out = append(out, slices.Clone(it.IDs))
	})
	return out
}

// passBatches reads n passes (Reset between them) and returns each pass's
// batches' ids.
func passBatches(t *testing.T, ctx context.Context, p *actors.Pipeline, n int) [][][]uint64 {
	t.Helper()
	return passItems(t, ctx, p, n, func(it actors.Item) []uint64 {
		checkAligned(t, it)
		return slices.Clone(it.IDs)
	})
}

// passItems reads n passes (Reset between them) and returns what each
// gives of every item of each pass.
func passItems[T any](t *testing.T, ctx context.Context, p *actors.Pipeline, n int, each func(actors.Item) T) [][]T {
	t.Helper()
	var passes [][]T
	for pass := range n {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		var items []T
		readPass(t, ctx, p, func(it actors.Item) { items = append(items, each(it)) })
		passes = append(passes, items)
	}
	return passes
}

// jittery opens files whose reads take a random few microseconds, from a
// generator seeded by seed, so that readers finish in another order on
// every run.
func jittery(seed uint64) func(context.Context, string) (readers.Reader, error) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(ctx context.Context, entry string) (readers.Reader, error) {
		r, err := actors.OpenFile(ctx, entry)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		d := time.Duration(rng.IntN(300)) * time.Microsecond
		mu.Unlock()
		return indexedSlow{&slow{Reader: r, d: d}, indexing{r}}, nil
	}
}

type slow struct {
	readers.Reader
	d time.Duration
	n int
}

func (s *slow) Next(ctx context.Context) (tensor.Slots, error) {
	if s.n++; s.n%7 == 0 {
		time.Sleep(s.d) // a slow disk, not synchronization
	}
	return s.Reader.Next(ctx)
}

type indexedSlow struct {
	*slow
	indexing
}

// The order of the batches is a function of the files, the seed and the
// epoch: 1, 2, 8 or 16 readers, with or without an xmap stage, groups of
// 8 or 64 (which carry four batches to the batch stage in one message),
// and readers slowed at random so that they finish in another order every
// time, give the same batches in the same order.
func TestOrderDoesNotDependOnReadersOrTiming(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 16, 40, 300)
	identity := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	run := func(threads int, xmap bool, group int, seed uint64) [][][]uint64 {
		var extra []actors.Stage
		if xmap {
			extra = append(extra, actors.XMap{Fn: identity, Workers: 4}) // unordered, but in the order
		}
		p, err := actors.New(ordered(paths, threads, extra...), actors.Options{System: sharedSys, Open: jittery(seed), GroupSize: group})
		require.NoError(t, err)
		passes := passBatches(t, ctx, p, 2)
		closeAndCheck(t, p, sharedSys)
		return passes
	}
	want := run(1, false, 8, 1)
	var all []uint64
	for _, b := range want[0] {
		all = append(all, b...)
	}
	requireExactlyOnce(t, allIDs(16, 40), all)
	require.NotEqual(t, want[0], want[1], "each epoch has an order of its own")
	for _, threads := range []int{2, 8, 16} {
		for _, xmap := range []bool{false, true} {
			for _, group := range []int{8, 64} {
				require.Equal(t, want, run(threads, xmap, group, uint64(threads)), "%d readers, xmap %v, groups of %d", threads, xmap, group)
			}
		}
	}
}

// In a shuffled order the readers share the pieces of one file (its
// chunks, permuted): three readers of a file of many chunks each read some
// of it, and the batches are those of one reader. (Unshuffled, a piece runs
// on for four blocks of the order, 16,384 records: a small file is one.)
func TestReadersShareOneFile(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 600, 1000)
	run := func(threads int) ([][][]uint64, []actors.StageStats) {
		p, err := actors.New(ordered(paths, threads), actors.Options{System: sharedSys, GroupSize: 8})
		require.NoError(t, err)
		passes := passBatches(t, ctx, p, 2)
		stats := p.StageStats()
		closeAndCheck(t, p, sharedSys)
		return passes, stats
	}
	want, _ := run(1)
	got, stats := run(3)
	require.Equal(t, want, got)
	readers := 0
	for _, s := range stats {
		if strings.Contains(s.Stage, "/reader-") {
			readers++
			require.Positive(t, s.Items, "%s read a piece of the file", s.Stage)
		}
	}
	require.Equal(t, 3, readers)
}

// Ranks read disjoint, equal shares whose union is the epoch, and know how
// many batches they get before they start.
func TestShardsAreDisjointEqualAndCoverTheEpoch(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 67, 300) // 201 records: 4 ranks leave 1 over
	for _, run := range []struct {
		rem   order.Remainder
		group int
	}{{order.Drop, 8}, {order.Pad, 8}, {order.Drop, 64}, {order.Pad, 64}} {
		rem := run.rem
		seen := map[uint64]int{}
		var counts []int
		padded := 0
		for rank := range 4 {
			p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: run.group, Lanes: 1 + rank%3,
				Shard: actors.Shard{Rank: rank, World: 4, Remainder: rem}})
			require.NoError(t, err)
			n, err := p.Batches()
			require.NoError(t, err)
			got := 0
			readPass(t, ctx, p, func(it actors.Item) {
				checkAligned(t, it)
				got++
				padded += it.Padding
				for i, id := range it.IDs {
					if i < it.Instances-it.Padding {
						seen[id]++
					}
				}
			})
			require.Equal(t, n, got, "Batches said how many came")
			counts = append(counts, got)
			closeAndCheck(t, p, sharedSys)
		}
		require.Equal(t, []int{counts[0], counts[0], counts[0], counts[0]}, counts, "%v: ranks get as many batches", rem)
		for id, k := range seen {
			require.Equal(t, 1, k, "%v: sample %x dealt to one rank", rem, id)
		}
		if rem == order.Drop {
			require.Len(t, seen, 200, "the one left over is dropped")
		} else {
			require.Len(t, seen, 201)
			require.Equal(t, 3, padded, "4 x 51 - 201 positions repeat, marked")
		}
	}
}

// saved is st as it would be saved and read back.
func saved(t *testing.T, st actors.State) *actors.State {
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var back actors.State
	require.NoError(t, json.Unmarshal(b, &back))
	return &back
}

// own is the Options.Resume of a rank that goes on from its own state; nil
// starts afresh.
func own(st *actors.State) []actors.State {
	if st == nil {
		return nil
	}
	return []actors.State{*st}
}

// A pipeline stopped anywhere, several times, each time resumed from its
// state with another number of readers, delivers the rest of the epoch and
// the next exactly as the uninterrupted run does; with groups of 8 and of
// 64 (which carry four batches to the batch stage in one message).
func TestResumeContinuesExactly(t *testing.T) {
	for _, group := range []int{8, 64} {
		t.Run(fmt.Sprint("groups of ", group), func(t *testing.T) { resumeContinuesExactly(t, group) })
	}
}

func resumeContinuesExactly(t *testing.T, group int) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 57, 300)
	opts := actors.Options{System: sharedSys, GroupSize: group}
	p, err := actors.New(ordered(paths, 4), opts)
	require.NoError(t, err)
	want := batches(t, ctx, p)
	require.NoError(t, p.Reset())
	want = append(want, batches(t, ctx, p)...)
	closeAndCheck(t, p, sharedSys)

	rng := rand.New(rand.NewPCG(3, 3))
	for range 8 {
		var cuts []int
		for range 1 + rng.IntN(3) {
			cuts = append(cuts, rng.IntN(len(want)+1))
		}
		slices.Sort(cuts)
		var got [][]uint64
		var st *actors.State
		for i, end := range append(cuts, len(want)) {
			o := opts
			o.Resume, o.Lanes = own(st), 1+(i+len(cuts))%3 // a resume may run on other lanes
			p, err := actors.New(ordered(paths, 1+i%4), o)
			require.NoError(t, err)
			for len(got) < end {
				it, err := p.Next(ctx)
				if errors.Is(err, io.EOF) {
					require.NoError(t, p.Reset())
					continue
				}
				require.NoError(t, err)
				require.EqualValues(t, len(got)/(len(want)/2), it.Epoch)
				require.Equal(t, len(got)%(len(want)/2), it.Index, "the batch's index in its epoch")
				got = append(got, slices.Clone(it.IDs))
			}
			s, err := p.State()
			require.NoError(t, err)
			st = saved(t, s)
			closeAndCheck(t, p, sharedSys)
		}
		require.Equal(t, want, got, "stopped after %v batches", cuts)
	}
}

// Four ranks stopped at different steps, one with an item committed past
// its position, resume as three from all four states: every sample not yet
// delivered is delivered once, and the three get as many batches each. A
// single rank's state of the four is refused for three.
func TestElasticResumeDeliversTheRestOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	seen := map[uint64]int{}
	note := func(it actors.Item) {
		checkAligned(t, it)
		for _, id := range it.IDs[:it.Instances-it.Padding] {
			seen[id]++
		}
	}
	var states []actors.State
	for rank := range 4 {
		p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8,
			Shard: actors.Shard{Rank: rank, World: 4, Remainder: order.Pad}})
		require.NoError(t, err)
		for range 1 + rank%3 { // ranks stop at different steps
			it, err := p.Next(ctx)
			require.NoError(t, err)
			note(it)
		}
		s, err := p.State()
		require.NoError(t, err)
		states = append(states, *saved(t, s))
		closeAndCheck(t, p, sharedSys)
	}
	states[0].Beyond = []uint64{states[0].Done + 16} // an item committed ahead, by a second device
	_, err := actors.New(ordered(paths, 3), actors.Options{System: sharedSys, GroupSize: 8, Resume: states[1:2],
		Shard: actors.Shard{Rank: 1, World: 3, Remainder: order.Pad}})
	require.ErrorContains(t, err, "needs the states of all 4")
	var counts []int
	for rank := range 3 {
		p, err := actors.New(ordered(paths, 3), actors.Options{System: sharedSys, GroupSize: 8, Resume: states,
			Shard: actors.Shard{Rank: rank, World: 3, Remainder: order.Pad}})
		require.NoError(t, err)
		n := 0
		readPass(t, ctx, p, func(it actors.Item) { note(it); n++ })
		counts = append(counts, n)
		closeAndCheck(t, p, sharedSys)
	}
	require.Equal(t, []int{counts[0], counts[0], counts[0]}, counts)
	require.Len(t, seen, 210-16, "all but the item committed ahead, which no pipeline here delivered")
	for id, k := range seen {
		require.Equal(t, 1, k, "sample %x", id)
	}
}

// A state resumes only the data set and order it was taken over, and says
// why not otherwise.
func TestResumeRefusesAnotherDataSetOrOrder(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 50, 300)
	p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.NoError(t, err)
	st, err := p.State()
	require.NoError(t, err)
	closeAndCheck(t, p, sharedSys)

	other := testutil.WriteFiles(t, 2, 51, 300)
	for name, stages := range map[string][]actors.Stage{
		"another data set": ordered(other, 2),
		"another seed":     {actors.Files{Paths: paths}, actors.Shuffle{Window: 50, Seed: 8}, actors.Batch{Size: 16}},
		"another batch":    {actors.Files{Paths: paths}, actors.Shuffle{Window: 50, Seed: 7}, actors.Batch{Size: 8}},
	} {
		_, err := actors.New(stages, actors.Options{System: sharedSys, Resume: []actors.State{st}})
		require.ErrorIs(t, err, actors.ErrState, name)
		require.Empty(t, registered.Actors(sharedSys))
	}
	st.Version++
	_, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, Resume: []actors.State{st}})
	require.ErrorContains(t, err, "version")
}

// A state refused over another data set names the files written after
// its data: the sum it keeps cannot say which. A file only touched is the
// same data set, and resumes.
func TestARefusedStateNamesTheFilesWrittenSince(t *testing.T) {
	paths := testutil.WriteFiles(t, 3, 50, 300)
	then := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range paths {
		require.NoError(t, os.Chtimes(p, then, then))
	}
	p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	st, err := p.State()
	require.NoError(t, err)
	closeAndCheck(t, p, sharedSys)
	require.True(t, st.Data.Modified.Equal(then), "the newest file's time: %v", st.Data.Modified)

	later := then.Add(time.Hour)
	require.NoError(t, os.Chtimes(paths[0], later, later))
	p, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, Resume: []actors.State{st}})
	require.NoError(t, err, "touched, not rewritten")
	closeAndCheck(t, p, sharedSys)

	testutil.WriteRecords(t, paths[2], 300, 51, func(r int) tensor.Slots { return testutil.Sample(9, r) })
	_, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, Resume: []actors.State{st}})
	require.ErrorIs(t, err, actors.ErrState)
	require.ErrorContains(t, err, "written after the newest file of the state's data (2026-01-02T03:04:05Z): "+paths[0]+", "+paths[2])
	require.NotContains(t, err.Error(), paths[1])
}

// Only a pipeline that keeps its items' places in the order has a state.
func TestStateNeedsTheOrder(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 20, 300)
	q, err := readers.NewFeedQueue(4, nil)
	require.NoError(t, err)
	for name, stages := range map[string][]actors.Stage{
		"feed queue":              {actors.Queue{Queue: q}, actors.Batch{Size: 4}},
		"any order":               {actors.Files{Paths: paths, AnyOrder: true}, actors.Batch{Size: 4}},
		"two batches":             {actors.Files{Paths: paths}, actors.Batch{Size: 4}, actors.Batch{Size: 2}},
		"a shuffle after a batch": {actors.Files{Paths: paths}, actors.Batch{Size: 4}, actors.MultiPass{Passes: 2}, actors.Shuffle{Window: 8}},
	} {
		p, err := actors.New(stages, actors.Options{System: sharedSys})
		require.NoError(t, err, name)
		_, err = p.State()
		require.ErrorIs(t, err, actors.ErrState, name)
		_, err = p.Batches()
		require.ErrorIs(t, err, actors.ErrState, name)
		closeAndCheck(t, p, sharedSys)
	}
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths, AnyOrder: true}}, actors.Options{System: sharedSys, Shard: actors.Shard{Rank: 1, World: 2}})
	require.ErrorIs(t, err, actors.ErrBadSpec, "a shard needs the order")
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths}}, actors.Options{System: sharedSys, Shard: actors.Shard{Rank: 2, World: 2}})
	require.ErrorIs(t, err, actors.ErrBadSpec)
}

// Devices commit out of order; a state taken while some are ahead of
// others, resumed on another number of devices, repeats nothing and loses
// nothing.
// With a multi-pass stage, a state taken across the boundary of two
// epochs of one pass says which items of both were committed.
func TestDevicesResumeExactly(t *testing.T) {
	for _, group := range []int{8, 64} {
		t.Run(fmt.Sprint("groups of ", group), func(t *testing.T) { devicesResumeExactly(t, group, 0, 7) })
	}
	for _, stopAt := range []int{14, 16, 18} { // an epoch is 15 batches
		t.Run(fmt.Sprint("multi-pass, stopped after ", stopAt), func(t *testing.T) { devicesResumeExactly(t, 8, 2, stopAt) })
	}
}

func devicesResumeExactly(t *testing.T, group, passes, stopAt int) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 80, 300)
	stages := ordered(paths, 3)
	if passes > 0 {
		stages = append(stages, actors.MultiPass{Passes: passes})
	}
	collect := func(n int, st *actors.State, stopAt int) (map[int][]uint64, *actors.State) {
		var mu sync.Mutex
		got := map[int][]uint64{}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		p, err := actors.NewDevices(stages, actors.Devices{N: n, Step: func(sctx context.Context, it actors.Item) error {
			mu.Lock()
			defer mu.Unlock()
			if stopAt >= 0 && len(got) >= stopAt {
				cancel()
				<-sctx.Done()
				return sctx.Err()
			}
			if it.Seq%3 == 1 {
				time.Sleep(time.Millisecond) // a slow device: the others commit ahead of it
			}
			got[it.Seq] = slices.Clone(it.IDs)
			return nil
		}}, actors.Options{System: sharedSys, GroupSize: group, Resume: own(st)})
		require.NoError(t, err)
		err = p.Run(rctx)
		if stopAt < 0 {
			require.NoError(t, err)
		}
		closeAndCheck(t, p, sharedSys) // no step commits after this: the state is final
		s, err := p.State()
		require.NoError(t, err)
		return got, saved(t, s)
	}
	want, _ := collect(1, nil, -1)
	first, st := collect(3, nil, stopAt)
	rest, _ := collect(2, st, -1)
	var all [][]uint64
	for _, m := range []map[int][]uint64{first, rest} {
		for _, ids := range m {
			all = append(all, ids)
		}
	}
	var wantAll [][]uint64
	for _, ids := range want {
		wantAll = append(wantAll, ids)
	}
	require.ElementsMatch(t, wantAll, all)
}

// An item committed past a state's position (Beyond) is skipped when the
// pipeline resumes, and stays in the state until the position passes it:
// resumed and stopped again before reaching it, a state that forgot it
// delivered it twice (found by sim --preempt, seed 5).
func TestResumeKeepsItemsCommittedPastItsPosition(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 60, 300)
	p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	var want [][]uint64
	for range 4 {
		it, err := p.Next(ctx)
		require.NoError(t, err)
		want = append(want, slices.Clone(it.IDs))
	}
	st, err := p.State()
	require.NoError(t, err)
	closeAndCheck(t, p, sharedSys)
	// As if a device had committed the 4th batch, and another not yet the
	// 2nd: the state stands after the 1st, with the 4th past it.
	st.Done, st.Beyond = 16, []uint64{48}
	p, err = actors.New(ordered(paths, 1), actors.Options{System: sharedSys, Resume: []actors.State{st}})
	require.NoError(t, err)
	it, err := p.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, want[1], it.IDs)
	again, err := p.State()
	require.NoError(t, err)
	require.Equal(t, uint64(32), again.Done)
	require.Equal(t, []uint64{48}, again.Beyond, "the 4th batch is still delivered")
	it, err = p.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, want[2], it.IDs)
	it, err = p.Next(ctx)
	require.NoError(t, err)
	require.NotEqual(t, want[3], it.IDs, "the 4th batch is not delivered again")
	closeAndCheck(t, p, sharedSys)
}

// A reader of a file's bytes that counts them, and reads with the context
// it was opened with, as a reader of remote storage does: a call after that
// context ended fails.
type countedFile struct {
	f    *os.File
	ctx  context.Context
	read *atomic.Int64
}

func (c countedFile) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("reading with the context the file was opened with: %w", err)
	}
	n, err := c.f.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

type countedCloser struct {
	f      *os.File
	closes *atomic.Int64
}

func (c countedCloser) Close() error {
	c.closes.Add(1)
	return c.f.Close()
}

// In the order a pass reads every chunk once, however many windows it
// spans, and a reader keeps its file open from one piece of it to the
// next, with the context it was opened with alive. A piece that ended
// inside a chunk made the next piece read and verify the whole chunk
// again (with 16 MB chunks a pass ran at 0.4 of any order), and reopening
// the file for every piece cost more than the order could spare
// (docs/performance.md).
func TestOrderReadsEachChunkOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 1200, 0) // one chunk, 75 windows
	st, err := os.Stat(paths[0])
	require.NoError(t, err)
	var read, opens, closes atomic.Int64
	open := func(ctx context.Context, entry string) (readers.Reader, error) {
		fh, err := os.Open(entry)
		if err != nil {
			return nil, err
		}
		opens.Add(1)
		return readers.NewRecordFile(countedFile{f: fh, ctx: ctx, read: &read}, st.Size(), entry, countedCloser{f: fh, closes: &closes}), nil
	}
	stages := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 16, Seed: 3}, actors.Batch{Size: 8}}
	p, err := actors.New(stages, actors.Options{System: sharedSys, GroupSize: 8, Open: open})
	require.NoError(t, err)
	for pass := range 3 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		before := read.Load()
		l := drain(t, ctx, p)
		require.Len(t, l.ids, 1200)
		require.LessOrEqual(t, read.Load()-before, st.Size(), "pass %d reads the chunk once", pass)
	}
	closeAndCheck(t, p, sharedSys)
	require.LessOrEqual(t, opens.Load(), int64(2), "opened to index it, and once to read it")
	require.Equal(t, opens.Load(), closes.Load(), "every reader opened is closed")
}

// mpItem is an item of a multi-pass job: the job's pass it came in (a
// resumed pipeline counts its passes from 0), its place and its samples.
type mpItem struct {
	pass, index, epoch int
	ids                []uint64
}

// A multi-pass pipeline stopped anywhere (in either epoch of a pass, or at
// their boundary), several times, and resumed from its state with another
// number of readers, delivers the rest exactly as the uninterrupted run
// does, and its passes end where the run's do: a resumed pipeline's first
// pass is the rest of the one it stopped in. Batches counts every epoch of
// a pass, WholeBatches those delivered before the resume too.
func TestMultiPassResumesExactly(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 50, 300)
	stages := func(threads int) []actors.Stage {
		return append(ordered(paths, threads), actors.MultiPass{Passes: 2})
	}
	opts := actors.Options{System: sharedSys, GroupSize: 8}
	p, err := actors.New(stages(3), opts)
	require.NoError(t, err)
	var want []mpItem
	for pass := range 2 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		n, err := p.Batches()
		require.NoError(t, err)
		readPass(t, ctx, p, func(it actors.Item) {
			want = append(want, mpItem{pass: it.Pass, index: it.Index, epoch: it.Epoch, ids: slices.Clone(it.IDs)})
		})
		require.Equal(t, 2*10, n, "two epochs of 150 samples in batches of 16")
	}
	closeAndCheck(t, p, sharedSys)
	require.Len(t, want, 40)
	require.EqualValues(t, 3, want[39].epoch, "two passes of two epochs")

	rng := rand.New(rand.NewPCG(5, 5))
	for range 10 {
		stops := []int{10, 20} // the boundaries of an epoch and of a pass
		for range 1 + rng.IntN(3) {
			stops = append(stops, rng.IntN(len(want)+1))
		}
		slices.Sort(stops)
		got := resumedMultiPass(t, ctx, stages, opts, append(stops, len(want)))
		require.Equal(t, want, got, "stopped after %v batches", stops)
	}
}

// resumedMultiPass runs the job of TestMultiPassResumesExactly, stopped
// after each of stops items and resumed from its state.
func resumedMultiPass(t *testing.T, ctx context.Context, stages func(int) []actors.Stage, opts actors.Options, stops []int) []mpItem {
	t.Helper()
	var got []mpItem
	var st *actors.State
	for i, end := range stops {
		o := opts
		o.Resume = own(st)
		p, err := actors.New(stages(1+i%3), o)
		require.NoError(t, err)
		base := 0 // the job's pass the pipeline's pass 0 is
		if st != nil {
			base = int(st.Epoch / 2)
		}
		left, err := p.Batches()
		require.NoError(t, err)
		whole, err := p.WholeBatches()
		require.NoError(t, err)
		require.Equal(t, 20, whole, "a pass's batches, wherever the resume stands in it")
		for len(got) < end {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				require.Zero(t, left, "Batches said how many the pass had")
				require.NoError(t, p.Reset())
				left, err = p.Batches()
				require.NoError(t, err)
				continue
			}
			require.NoError(t, err)
			left--
			got = append(got, mpItem{pass: base + it.Pass, index: it.Index, epoch: it.Epoch, ids: slices.Clone(it.IDs)})
		}
		s, err := p.State()
		require.NoError(t, err)
		st = saved(t, s)
		closeAndCheck(t, p, sharedSys)
	}
	return got
}

// A state taken while the first item of a pass is being stepped and later
// ones are committed stands in that pass's epoch, at its start, with the
// later ones past it: not at the end of the epoch before, which resumed as
// well but told a trainer (and sim --preempt, seed 195 under -race) that
// the items it listed were of another epoch.
func TestStateStandsInTheEpochItsPassReads(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 64, 300)
	var pass atomic.Int32
	started := make(chan int, 64) // the items the devices start, in pass 1
	var p *actors.Pipeline
	var st actors.State
	var stErr error
	step := func(_ context.Context, it actors.Item) error {
		if pass.Load() != 1 {
			return nil
		}
		if it.Seq != 0 {
			started <- it.Seq
			return nil
		}
		// Devices 1 and 2 started their second items: their first are
		// committed, this one is not.
		for seen := map[int]bool{}; !seen[4] || !seen[5]; {
			seen[<-started] = true
		}
		st, stErr = p.State()
		return nil
	}
	p, err := actors.NewDevices(ordered(paths, 2), actors.Devices{N: 3, Step: step}, actors.Options{System: sharedSys, GroupSize: 8})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	pass.Store(1)
	require.NoError(t, p.Reset())
	require.NoError(t, p.Run(ctx))
	closeAndCheck(t, p, sharedSys)
	require.NoError(t, stErr)
	require.EqualValues(t, 1, st.Epoch)
	require.Zero(t, st.Done)
	require.Contains(t, st.Beyond, uint64(16), "item 1")
	require.Contains(t, st.Beyond, uint64(32), "item 2")
}

// Building a pipeline in the order reads every file's index, on the retry
// schedule: over storage that fails, that takes as long as the schedule.
// NewContext stops when its context ends, and says why.
func TestBuildingStopsWithItsContext(t *testing.T) {
	paths := testutil.WriteFiles(t, 4, 20, 300)
	opened := make(chan struct{}, 16)
	failing := func(context.Context, string) (readers.Reader, error) {
		opened <- struct{}{}
		return nil, fmt.Errorf("storage unavailable: %w", syscall.EIO)
	}
	ctx, cancel := context.WithCancel(testutil.Context(t))
	retry := supervisor.Backoff{Attempts: 1_000, Initial: time.Hour, Max: time.Hour} // a build that would take weeks
	done := make(chan error, 1)
	go func() {
		_, err := actors.NewContext(ctx, ordered(paths, 2), actors.Options{System: sharedSys, Open: failing, Retry: retry})
		done <- err
	}()
	<-opened // it is building: the first open failed and waits to retry
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "indexing its files")
	require.Empty(t, registered.Actors(sharedSys))
}

// A pipeline started at an epoch (Options.Epoch, a trainer's set_epoch)
// delivers that epoch as one run through the epochs before it does, and
// names it in its items and its state.
func TestPipelineStartsAtTheEpochAsked(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 64, 300)
	p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8})
	require.NoError(t, err)
	want := passBatches(t, ctx, p, 3)[2]
	closeAndCheck(t, p, sharedSys)

	p, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8, Epoch: 2})
	require.NoError(t, err)
	var got [][]uint64
	readPass(t, ctx, p, func(it actors.Item) {
		require.Equal(t, 2, it.Epoch)
		got = append(got, slices.Clone(it.IDs))
	})
	require.Equal(t, want, got)
	st, err := p.State()
	require.NoError(t, err)
	require.Equal(t, 3, st.Epoch, "a finished epoch stands at the next one's start")
	closeAndCheck(t, p, sharedSys)

	_, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, Epoch: 1, Resume: []actors.State{st}})
	require.ErrorIs(t, err, actors.ErrBadSpec)
	_, err = actors.New(ordered(paths, 2), actors.Options{System: sharedSys, Epoch: -1})
	require.ErrorIs(t, err, actors.ErrBadSpec)
}

// A gzip'd IDX pair gives the batches of the same pair raw: the readers
// that start inside it seek in its decoded copy (readers' decode cache)
// instead of decompressing it from its start for every split.
func TestGzipIDXGivesTheBatchesOfItsRawFile(t *testing.T) {
	ctx := testutil.Context(t)
	cache := t.TempDir()
	t.Setenv(readers.DecodeCacheEnv, cache)
	raw, gz := t.TempDir(), t.TempDir()
	images := bytes.Repeat([]byte{0}, 4*5000)
	for i := range images {
		images[i] = byte(i / 4 * 7)
	}
	var paths []string
	for _, dir := range []string{raw, gz} {
		z := dir == gz
		paths = append(paths, writeIDX(t, filepath.Join(dir, "train-images-idx3-ubyte"), []uint32{5000, 2, 2}, images, z))
		labels := make([]byte, 5000)
		for i := range labels {
			labels[i] = byte(i % 10)
		}
		writeIDX(t, filepath.Join(dir, "train-labels-idx1-ubyte"), []uint32{5000}, labels, z)
	}
	read := func(path string) [][]byte {
		stages := []actors.Stage{actors.Files{Paths: []string{"idx:" + path}, Threads: 2}, actors.Shuffle{Window: 700, Seed: 3}, actors.Batch{Size: 64}}
		p, err := actors.New(stages, actors.Options{System: sharedSys})
		require.NoError(t, err)
		var out [][]byte
		// Each batch's ids and bytes.
		for _, pass := range passItems(t, ctx, p, 2, func(it actors.Item) []byte {
			b := binary.LittleEndian.AppendUint64(nil, uint64(len(it.IDs)))
			for _, id := range it.IDs {
				b = binary.LittleEndian.AppendUint64(b, id)
			}
			for _, s := range it.Slots {
				b = append(b, s.Bytes()...)
			}
			return b
		}) {
			out = append(out, pass...)
		}
		closeAndCheck(t, p, sharedSys)
		return out
	}
	want := read(paths[0])
	require.Len(t, want, 2*79)
	require.Equal(t, want, read(paths[1]))
	copies, err := os.ReadDir(cache)
	require.NoError(t, err)
	require.Len(t, copies, 2, "the images and labels decoded once")
}

// writeIDX writes an IDX file of uint8 data of the given dims, gzip'd or
// not (then named .gz), and returns its path.
func writeIDX(t testing.TB, path string, dims []uint32, data []byte, gz bool) string {
	t.Helper()
	b := []byte{0, 0, 8, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	b = append(b, data...)
	if gz {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, err := w.Write(b)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		b, path = z.Bytes(), path+".gz"
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// WebDataset shards, raw and gzip'd, give the same batches in the order,
// every sample once, their variable-length fields as sequences; and a
// sample whose field is damaged is skipped and counted.
func TestWebDatasetShardsInTheOrder(t *testing.T) {
	ctx := testutil.Context(t)
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	dir := t.TempDir()
	var raw, gz []string
	for s := range 2 {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for i := range 1500 {
			key := fmt.Sprintf("%d-%05d", s, i)
			for _, f := range []struct{ ext, data string }{{"cls", fmt.Sprint(i % 10)}, {"txt", strings.Repeat("x", 1+i%9)}} {
				if s == 1 && i == 700 && f.ext == "cls" {
					f.data = "damaged"
				}
				require.NoError(t, w.WriteHeader(&tar.Header{Name: key + "." + f.ext, Mode: 0o444, Size: int64(len(f.data)), Typeflag: tar.TypeReg}))
				_, err := w.Write([]byte(f.data))
				require.NoError(t, err)
			}
		}
		require.NoError(t, w.Close())
		path := filepath.Join(dir, fmt.Sprintf("shard-%d.tar", s))
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, err := zw.Write(b.Bytes())
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, os.WriteFile(path+".gz", z.Bytes(), 0o644))
		raw, gz = append(raw, "wds:"+path), append(gz, "wds:"+path+".gz")
	}
	read := func(paths []string) ([][]byte, []uint64, uint64) {
		stages := []actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Shuffle{Window: 400, Seed: 5}, actors.Batch{Size: 32}}
		p, err := actors.New(stages, actors.Options{System: sharedSys, OnCorrupt: supervisor.SkipCorrupt})
		require.NoError(t, err)
		var ids []uint64
		out := passItems(t, ctx, p, 1, func(it actors.Item) []byte {
			ids = append(ids, it.IDs...)
			b := slices.Clone(it.Slots[1].Bytes())
			for _, l := range it.Slots[1].LoD[0] {
				b = binary.LittleEndian.AppendUint64(b, uint64(l))
			}
			return append(b, it.Slots[0].Bytes()...)
		})[0]
		skipped := p.Stats().Skipped
		closeAndCheck(t, p, sharedSys)
		return out, ids, skipped
	}
	want, ids, skipped := read(raw)
	require.Len(t, ids, 2999)
	require.EqualValues(t, 1, skipped)
	var all []uint64
	for _, id := range allIDs(2, 1500) {
		if id != messages.SampleID(1, 700) {
			all = append(all, id)
		}
	}
	requireExactlyOnce(t, all, ids)
	got, _, _ := read(gz)
	require.Equal(t, want, got)
}
