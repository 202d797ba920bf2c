package actors_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// serviceChain is the chain the service tests run: files, the order's
// shuffle, batch, and a double buffer that asks for more than the stage
// before it holds (Capacity).
func serviceChain(paths []string) []actors.Stage {
	return []actors.Stage{actors.Files{Paths: paths, Threads: 3}, actors.Shuffle{Window: 50, Seed: 3}, actors.Batch{Size: 16},
		actors.DoubleBuffer{Window: 8}}
}

// A Service whose worker is in the pipeline's own system (no network: the
// race detector sees the protocol's code, which the remote's own races keep
// it from in package service's tests) delivers the batches of a pipeline
// without it, pass after pass, after a Reset mid-pass, and when its service
// stage panics at any of its first messages: a restart hands every attempt
// in flight out again, fenced, and nothing is lost or delivered twice. The
// lease is an hour: nothing waits for the leases' ticks (the stage once
// handed on only as far as Capacity until the next message came, and a
// pass stalled until a tick).
func TestServiceInOneSystemDeliversExactlyOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 6, 150, 40)
	local, err := actors.New(serviceChain(paths), actors.Options{GroupSize: 8})
	require.NoError(t, err)
	want := passBatches(t, ctx, local, 3)[1:] // the runs below reset pass 0 after one batch
	require.NoError(t, local.Close())

	run := func(t *testing.T, faults faults.Injector) ([][][]uint64, actors.Stats) {
		sys := actors.NewSystem()
		defer sys.Shutdown()
		w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, Threads: 2})
		require.NoError(t, err)
		opts := actors.Options{System: sys, GroupSize: 8, Service: &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}}
		opts.Faults = faults
		p, err := actors.New(serviceChain(paths), opts)
		require.NoError(t, err)
		_, err = p.Next(ctx) // a pass begun, then reset: its tasks are dropped
		require.NoError(t, err)
		require.NoError(t, p.Reset())
		got := passBatches(t, ctx, p, 2)
		st := p.Stats()
		require.NoError(t, p.Close())
		require.NoError(t, w.Close())
		require.Zero(t, w.Stats().Sessions, "sessions left on the worker")
		return got, st
	}
	got, st := run(t, nil)
	require.Equal(t, want, got)
	// The workers' batches count as alive from their arrival (the summary
	// said "peak batches alive 0" with a service), within the service
	// stage's bound: (workers x Tasks + 1) x Credit, the outlet's and
	// the double buffer's.
	require.Positive(t, st.PeakLiveBatches)
	require.LessOrEqual(t, st.PeakLiveBatches, (1*2+1)*actors.DefaultServiceCredit+2+8+1)
	for _, n := range []int64{1, 2, 3, 5, 8, 13, 21, 34} {
		t.Run(fmt.Sprintf("panic at %d", n), func(t *testing.T) {
			got, st := run(t, faults.PanicAt{Kind: actors.KindService, N: n})
			require.Positive(t, st.Restarts, "the fault fired")
			require.Equal(t, want, got)
		})
	}
	// The message lost with the panic is a task's end: without the
	// restart's hand-out, the task would never complete.
	got, st = run(t, &panicAtFirst[*messages.ServiceTaskEnd]{})
	require.Positive(t, st.Restarts, "the fault fired")
	require.Equal(t, want, got)
}

// panicAtFirst panics the service stage at the first message of type M.
type panicAtFirst[M any] struct{ fired atomic.Bool }

func (p *panicAtFirst[M]) BeforeMessage(_, kind string, _ int64, msg any) {
	if _, ok := msg.(M); ok && kind == actors.KindService && p.fired.CompareAndSwap(false, true) {
		panic("injected")
	}
}

// A Service pipeline's State resumes a pipeline with or without the
// service, and the other way round: the batches of two epochs, cut at
// drawn places, are those of one uninterrupted run.
func TestServiceResumesFromItsState(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 120, 40)
	local, err := actors.New(serviceChain(paths), actors.Options{GroupSize: 8})
	require.NoError(t, err)
	var want [][]uint64
	for _, pass := range passBatches(t, ctx, local, 2) {
		want = append(want, pass...)
	}
	require.NoError(t, local.Close())

	sys := actors.NewSystem()
	defer sys.Shutdown()
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}})
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close()) }()
	var got [][]uint64
	var st *actors.State
	for i, end := range []int{7, 8, len(want)/2 + 3, len(want)} {
		opts := actors.Options{System: sys, GroupSize: 8, Resume: own(st)}
		if i%2 == 0 {
			opts.Service = &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}
		}
		p, err := actors.New(serviceChain(paths), opts)
		require.NoError(t, err)
		for len(got) < end {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				require.NoError(t, p.Reset())
				continue
			}
			require.NoError(t, err)
			got = append(got, it.IDs)
		}
		s, err := p.State()
		require.NoError(t, err)
		st = &s
		closeAndCheck(t, p, nil)
	}
	require.Equal(t, want, got)
}

// Maps run on the workers, found by their names: the batches are those of
// the same chain in one process. A map without a name is refused, and a
// worker that does not know a name fails the pipeline saying so.
func TestServiceRunsNamedMapsOnItsWorkers(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 100, 40)
	plus := func(s tensor.Slots) (tensor.Slots, error) {
		v, err := tensor.View[int64](s[0].Tensor)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = x + 7
		}
		s[0].Tensor = tensor.MustFromSlice(s[0].Tensor.Shape(), out)
		return s, nil
	}
	chain := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 32, Seed: 5}, actors.Map{Fn: plus, Name: "plus"},
		actors.Batch{Size: 8}, actors.XMap{Fn: plus, Name: "plus", Workers: 2}, actors.DoubleBuffer{Window: 8}}
	values := func(opts actors.Options) [][]int64 {
		p, err := actors.New(chain, opts)
		require.NoError(t, err)
		defer closeAndCheck(t, p, nil)
		var out [][]int64
		for {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			v, err := tensor.View[int64](it.Slots[0].Tensor)
			require.NoError(t, err)
			out = append(out, slices.Clone(v))
		}
	}
	want := values(actors.Options{GroupSize: 8})
	sys := actors.NewSystem()
	defer sys.Shutdown()
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, Maps: map[string]actors.MapFunc{"plus": plus}})
	require.NoError(t, err)
	svc := &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}
	require.Equal(t, want, values(actors.Options{System: sys, GroupSize: 8, Service: svc}))
	require.NoError(t, w.Close())

	unnamed := slices.Clone(chain)
	unnamed[2] = actors.Map{Fn: plus}
	_, err = actors.New(unnamed, actors.Options{System: sys, Service: svc})
	require.ErrorIs(t, err, actors.ErrBadSpec)

	w, err = service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}})
	require.NoError(t, err)
	defer w.Close()
	p, err := actors.New(chain, actors.Options{System: sys, GroupSize: 8, Service: svc})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Next(ctx)
	require.ErrorContains(t, err, `this worker has no map named "plus"`)
}

// With padded shards (order.Pad), every rank's batches through the service
// are its batches in one process, padding and its marks included: the task
// padding starts in and the rest of the share are one task, the rank's own
// state.
func TestServicePadsShardsAsOneProcess(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 1000, 400) // 4,000 records: 3 ranks of 1,334, tasks of 208 before the tail
	sys := actors.NewSystem()
	defer sys.Shutdown()
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}})
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close()) }()
	type batch struct {
		ids     []uint64
		padding int
	}
	read := func(opts actors.Options) []batch {
		p, err := actors.New(serviceChain(paths), opts)
		require.NoError(t, err)
		defer closeAndCheck(t, p, nil)
		var out []batch
		for {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			out = append(out, batch{it.IDs, it.Padding})
		}
	}
	padded := 0
	for rank := range 3 {
		shard := actors.Shard{Rank: rank, World: 3, Remainder: order.Pad}
		want := read(actors.Options{GroupSize: 8, Shard: shard})
		got := read(actors.Options{System: sys, GroupSize: 8, Shard: shard, Service: &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}})
		require.Equal(t, want, got, "rank %d", rank)
		padded += want[len(want)-1].padding
	}
	require.Positive(t, padded, "some rank's last batch was padded")
}

// What the pipeline shows of its workers: while a pass runs, the worker is
// alive and its credit (batches it may send now) within Credit for each
// task it may run (Tasks, and the head); once the pipeline is closed, its
// session was closed with it, and nothing was handed out again.
func TestServiceWorkersShowStateAndCredit(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 200, 40)
	p, _ := inSystemService(t, paths, actors.Options{Service: &actors.Service{Credit: 4}})
	_, err := p.Next(ctx)
	require.NoError(t, err)
	running := p.ServiceWorkers()
	require.NoError(t, p.Close())
	closed := p.ServiceWorkers()

	require.Equal(t, "alive", running[0].State)
	require.GreaterOrEqual(t, running[0].Credit, int64(0))
	require.LessOrEqual(t, running[0].Credit, int64((2+1)*4))
	require.Equal(t, "closed", closed[0].State)
	require.Zero(t, closed[0].Reassigned)
}

// inSystemService starts a worker in a system of its own, serving the
// files' directory, and a pipeline of serviceChain(paths) on it with opts
// (groups of 8; opts.Service, when set, given the worker and an hour's
// lease); the worker and system end with the test.
func inSystemService(t *testing.T, paths []string, opts actors.Options) (*actors.Pipeline, *service.Worker) {
	t.Helper()
	sys := actors.NewSystem()
	t.Cleanup(sys.Shutdown)
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	var svc actors.Service
	if opts.Service != nil {
		svc = *opts.Service
	}
	svc.Workers, svc.Lease = []string{sys.Address()}, time.Hour
	opts.System, opts.GroupSize, opts.Service = sys, 8, &svc
	p, err := actors.New(serviceChain(paths), opts)
	require.NoError(t, err)
	return p, w
}

// The damaged chunks a worker skips are listed by the pipeline, named by
// its own file names, as in one process (the list held only what the
// client's own index found).
func TestServiceListsTheChunksItsWorkersSkipped(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 150, 400)
	bad := damageChunk(t, paths[1], 1)
	p, _ := inSystemService(t, paths, actors.Options{OnCorrupt: supervisor.SkipCorrupt})
	passBatches(t, ctx, p, 1)
	stats := p.Stats()
	require.NoError(t, p.Close())
	require.Equal(t, 1, stats.CorruptChunks)
	require.Equal(t, paths[1], stats.Corrupt[0].File)
	require.Equal(t, bad.Offset, stats.Corrupt[0].Offset)
	require.Equal(t, int(bad.NumRecords), stats.Corrupt[0].Records)
	require.ErrorContains(t, stats.Corrupt[0].Err, "checksum")
}

// damageChunk flips a byte of chunk k of the RecordIO file at path, and
// returns the chunk.
func damageChunk(t *testing.T, path string, k int) recordio.ChunkInfo {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	st, err := fh.Stat()
	require.NoError(t, err)
	x, err := recordio.LoadIndex(fh, st.Size(), path)
	require.NoError(t, fh.Close())
	require.NoError(t, err)
	bad := x.Chunks[k]
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[bad.Offset+recordio.HeaderSize+3] ^= 0xff
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return bad
}

// A task that fails on a worker (a damaged chunk, under the fail policy)
// fails the pipeline with the worker's error, its file and offset kept,
// as a reader's in one process would.
func TestServiceFailsWithTheErrorOfAWorkersTask(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 150, 400)
	bad := damageChunk(t, paths[1], 1)
	p, _ := inSystemService(t, paths, actors.Options{})
	defer p.Close()
	var err error
	for err == nil {
		_, err = p.Next(ctx)
	}
	se, ok := errors.AsType[*actors.StageError](err)
	require.True(t, ok, "a stage error: %v", err)
	require.Equal(t, actors.KindService, se.Stage[strings.IndexByte(se.Stage, '-')+1:])
	require.Equal(t, paths[1], se.File)
	require.Equal(t, bad.Offset, se.Offset)
	require.Equal(t, messages.ErrorClass_ERROR_CLASS_CORRUPT, se.Class)
	require.ErrorContains(t, err, "worker "+p.ServiceWorkers()[0].Addr)
}

// A map of Samples named by the trainer is made by the workers
// (WorkerOptions.SampleMaps) and sees the epoch and samples it would see in
// process: the batches are the same, pass after pass.
func TestServiceWorkersMakeSampleMapsByName(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 100, 40)
	stamp := func(s actors.Samples, slots tensor.Slots) (tensor.Slots, error) {
		out := make([]int64, len(s.IDs))
		for i, id := range s.IDs {
			out[i] = int64(s.Epoch)<<50 | int64(id)
		}
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{len(out), 1}, out)}, slots[1]}, nil
	}
	chain := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 32, Seed: 5}, actors.Batch{Size: 8},
		actors.Map{Samples: stamp, Name: "stamp(1)"}, actors.DoubleBuffer{Window: 8}}
	values := func(opts actors.Options) [][]int64 {
		p, err := actors.New(chain, opts)
		require.NoError(t, err)
		defer closeAndCheck(t, p, nil)
		var out [][]int64
		for pass := range 2 {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			for {
				it, err := p.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				v, err := tensor.View[int64](it.Slots[0].Tensor)
				require.NoError(t, err)
				out = append(out, slices.Clone(v))
			}
		}
		return out
	}
	want := values(actors.Options{GroupSize: 8})
	require.Equal(t, int64(1), want[len(want)-1][0]>>50, "the second pass is epoch 1")
	sys := actors.NewSystem()
	defer sys.Shutdown()
	made := func(name string) (actors.SampleMapFunc, error) {
		if name != "stamp(1)" {
			return nil, fmt.Errorf("no map %q", name)
		}
		return stamp, nil
	}
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, SampleMaps: made})
	require.NoError(t, err)
	defer w.Close()
	svc := &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}
	require.Equal(t, want, values(actors.Options{System: sys, GroupSize: 8, Service: svc}))
}

// Samples a worker's map cannot read are dropped there under the skip
// policy, counted once in the pipeline's Skipped and listed in Corrupt,
// named by the pipeline's own file names, as in one process.
func TestServiceWorkersDropTheSamplesTheirMapsCannotRead(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 40)
	bad := func(id uint64) bool { _, r := messages.SplitID(id); return r%17 == 3 }
	want := goodIDs(2, 100, bad)
	sys := actors.NewSystem()
	defer sys.Shutdown()
	made := func(name string) (actors.SampleMapFunc, error) { return badSampleMap(bad, 0), nil }
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, SampleMaps: made})
	require.NoError(t, err)
	defer w.Close()
	chain := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 32, Seed: 5}, actors.Batch{Size: 8},
		actors.Map{Samples: badSampleMap(bad, 0), Name: "bad"}, actors.DoubleBuffer{Window: 8}}
	p, err := actors.New(chain, actors.Options{System: sys, GroupSize: 8, OnCorrupt: supervisor.SkipCorrupt,
		Service: &actors.Service{Workers: []string{sys.Address()}, Lease: time.Hour}})
	require.NoError(t, err)
	ids := readPass(t, ctx, p, func(it actors.Item) { checkDoubled(t, it) })
	requireExactlyOnce(t, want, ids)
	st := p.Stats()
	require.NoError(t, p.Close())
	require.EqualValues(t, 200-len(want), st.Skipped)
	require.Equal(t, 200-len(want), st.CorruptChunks)
	require.Contains(t, []string{paths[0], paths[1]}, st.Corrupt[0].File)
	require.Contains(t, st.Corrupt[0].Err.Error(), "not an image")
}
