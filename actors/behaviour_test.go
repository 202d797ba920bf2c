package actors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestBackpressureBoundsLiveBatches(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 200, 512)
	const devices, prefetch, batch, group = 2, 2, 16, 32
	opts := actors.Options{GroupSize: group}
	sys := actors.NewSystem()
	opts.System = sys
	// Readers produce a batch in microseconds; a device step takes 2 ms,
	// far more than 100 times longer.
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: batch},
		actors.DoubleBuffer{Window: prefetch}}, actors.Devices{N: devices, StepTime: 2 * time.Millisecond}, opts)
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	st := p.Stats()
	closeAndCheck(t, p, sys)
	// Where a batch can be (docs/memory.md): the batch stage's unsent
	// buffer (capacity, overshot by what the input groups it demanded can
	// complete: window * group/batch), in flight to or queued in the double
	// buffer (prefetch per lane), read ahead into the next pass by the
	// double buffer (prefetch per lane), queued at a device
	// (max(prefetch, MinConsumerQueue)).
	const capacity, window = 2, 2
	queue := max(prefetch, actors.MinConsumerQueue)
	bound := capacity + window*group/batch + devices*prefetch + devices*prefetch + devices*queue
	require.Positive(t, st.PeakLiveBatches)
	require.LessOrEqual(t, st.PeakLiveBatches, bound)
	total := 0
	for _, d := range st.Devices {
		total += d.Instances
	}
	require.Equal(t, 600, total)
	t.Logf("peak live batches %d, bound %d", st.PeakLiveBatches, bound)
}

func TestResetCyclesDoNotLeak(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 400, 1024)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 8}},
		actors.Options{System: sys})
	require.NoError(t, err)
	want := allIDs(2, 400)[:20*8]
	for cycle := range 100 {
		var got []uint64
		for range 20 {
			it, err := p.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, cycle, it.Pass, "cycle %d", cycle)
			checkAligned(t, it)
			got = append(got, it.IDs...)
		}
		require.Equal(t, want, got, "cycle %d", cycle)
		require.NoError(t, p.Reset())
	}
	closeAndCheck(t, p, sys)
}

func TestMultiPassCompleteEveryPass(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 90, 300)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.MultiPass{Passes: 3},
		actors.Shuffle{Window: 40, Seed: 3}, actors.Batch{Size: 7}}, actors.Options{System: sys})
	require.NoError(t, err)
	l := drain(t, ctx, p)
	var want []uint64
	for range 3 {
		want = append(want, allIDs(2, 90)...)
	}
	requireExactlyOnce(t, want, l.ids)
	closeAndCheck(t, p, sys)
}

func TestThreadsGiveSameBatches(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 160, 700)
	count := func(paths []string, threads int) int {
		sys := actors.NewSystem()
		p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: threads}, actors.Batch{Size: 16}},
			actors.Options{System: sys})
		require.NoError(t, err)
		l := drain(t, ctx, p)
		closeAndCheck(t, p, sys)
		return l.items
	}
	one := count(paths[:1], 1)
	require.Equal(t, 10, one)
	for _, threads := range []int{3, 10, 2} {
		require.Equal(t, 3*one, count(paths, threads), "thread_num %d", threads)
	}
}

func TestConcurrentNextDeliversEachOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 300, 1000)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 5}},
		actors.Options{System: sys})
	require.NoError(t, err)
	var mu sync.Mutex
	var ids []uint64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				it, err := p.Next(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				ids = append(ids, it.IDs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	requireExactlyOnce(t, allIDs(3, 300), ids)
	closeAndCheck(t, p, sys)
}

// failingReader yields n items and then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Next(context.Context) (tensor.Slots, error) {
	if r.n == 0 {
		return nil, r.err
	}
	r.n--
	return testutil.Sample(0, r.n), nil
}
func (r *failingReader) Reset() error { return nil }
func (r *failingReader) Close() error { return nil }

func TestSourceErrorEndsPipeline(t *testing.T) {
	ctx := testutil.Context(t)
	cause := errors.New("disk on fire")
	sys := actors.NewSystem()
	open := func(context.Context, string) (readers.Reader, error) { return &failingReader{n: 10, err: cause}, nil }
	// In the order, the file is read to count its records (it has no chunk
	// index) when the pipeline is built, and the error comes then.
	_, err := actors.New([]actors.Stage{actors.Files{Paths: []string{"recordio:/data/a.rio"}}, actors.Batch{Size: 4}},
		actors.Options{System: sys, Open: open})
	require.ErrorIs(t, err, cause)
	var se *actors.StageError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "/data/a.rio", se.File)
	require.Empty(t, registered.Actors(sys))

	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{"recordio:/data/a.rio"}, AnyOrder: true}, actors.Batch{Size: 4}},
		actors.Options{System: sys, Open: open})
	require.NoError(t, err)
	var got error
	for got == nil {
		_, err := p.Next(ctx)
		require.NotErrorIs(t, err, io.EOF, "the pass must not end cleanly")
		got = err
	}
	require.ErrorIs(t, got, cause)
	require.ErrorAs(t, got, &se)
	require.Equal(t, "/data/a.rio", se.File)
	require.Contains(t, se.Stage, "reader")
	closeAndCheck(t, p, sys)
}

// Building over a long list stops at the first file that cannot be
// opened: that file is named, and the files after it are not opened. A
// list of a million missing names was opened name by name before the
// first was reported.
func TestBuildStopsAtTheFirstFileThatFails(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	open := func(_ context.Context, entry string) (readers.Reader, error) {
		mu.Lock()
		opened++
		mu.Unlock()
		return nil, fmt.Errorf("%s: %w", entry, os.ErrNotExist)
	}
	paths := make([]string, 10000)
	for i := range paths {
		paths[i] = fmt.Sprintf("recordio:/data/x-%05d.rio", i)
	}
	sys := actors.NewSystem()
	_, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 4}}, actors.Options{System: sys, Open: open})
	require.ErrorIs(t, err, os.ErrNotExist)
	var se *actors.StageError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "/data/x-00000.rio", se.File)
	require.LessOrEqual(t, opened, 8, "files opened after the first failed")
	require.Empty(t, registered.Actors(sys))
}

func TestMissingFileIsAnError(t *testing.T) {
	ctx := testutil.Context(t)
	sys := actors.NewSystem()
	// In the order, building the pipeline reads every file's index: it
	// fails at once, naming the file.
	_, err := actors.New([]actors.Stage{actors.Files{Paths: []string{"/nonexistent/x.rio"}}}, actors.Options{System: sys})
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorIs(t, err, actors.ErrStage)
	require.ErrorContains(t, err, "/nonexistent/x.rio")
	require.Empty(t, registered.Actors(sys))
	// In any order, the reader finds out.
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{"/nonexistent/x.rio"}, AnyOrder: true}}, actors.Options{System: sys})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "/nonexistent/x.rio")
	closeAndCheck(t, p, sys)
}

func TestRestartIntensityBreach(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 200, 400)
	sys := actors.NewSystem()
	always := alwaysPanic{kind: actors.KindBatch}
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 4}},
		actors.Options{System: sys, Faults: always, Intensity: supervisor.Intensity{MaxRestarts: 3, Within: time.Hour}})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.ErrorIs(t, err, supervisor.ErrRestartIntensity)
	require.ErrorContains(t, err, "batch")
	require.ErrorContains(t, err, "injected")
	require.Equal(t, 3, p.Stats().Restarts)
	closeAndCheck(t, p, sys)
}

type alwaysPanic struct{ kind string }

func (a alwaysPanic) BeforeMessage(stage, kind string, n int64, _ any) {
	if kind == a.kind {
		panic(fmt.Sprintf("injected: %s message %d", stage, n))
	}
}

// writeCorrupt writes a file of n records where the records in bad are not
// tensor encodings.
func writeCorrupt(t *testing.T, n int, bad map[int]bool) string {
	t.Helper()
	p := t.TempDir() + "/corrupt.rio"
	fh, err := os.Create(p)
	require.NoError(t, err)
	w, err := recordio.NewWriter(fh, recordio.WriterOptions{MaxChunkBytes: 512})
	require.NoError(t, err)
	for r := range n {
		rec, err := tensor.Encode(testutil.Sample(0, r))
		require.NoError(t, err)
		if bad[r] {
			rec = []byte("not a tensor")
		}
		require.NoError(t, w.Write(rec))
	}
	require.NoError(t, w.Close())
	require.NoError(t, fh.Close())
	return p
}

func TestCorruptRecordFailPolicy(t *testing.T) {
	ctx := testutil.Context(t)
	path := writeCorrupt(t, 100, map[int]bool{37: true})
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Batch{Size: 8}}, actors.Options{System: sys})
	require.NoError(t, err)
	var got error
	for got == nil {
		_, err := p.Next(ctx)
		require.NotErrorIs(t, err, io.EOF, "the pass must not end cleanly")
		got = err
	}
	require.ErrorIs(t, got, format.ErrCorrupt)
	var se *actors.StageError
	require.ErrorAs(t, got, &se)
	require.Equal(t, path, se.File)
	require.Positive(t, se.Offset)
	require.EqualValues(t, 37, se.Record)
	closeAndCheck(t, p, sys)
}

func TestCorruptSkipPolicyCountsExactly(t *testing.T) {
	ctx := testutil.Context(t)
	bad := map[int]bool{0: true, 5: true, 6: true, 50: true, 99: true}
	for r := 3; r < 100; r += 8 { // enough that some lie in windows two lanes read
		bad[r] = true
	}
	path := writeCorrupt(t, 100, bad)
	// A second file with one chunk whose checksum fails: the whole chunk
	// is skipped and its records counted.
	chunked := testutil.WriteFiles(t, 1, 100, 256)[0]
	data, err := os.ReadFile(chunked)
	require.NoError(t, err)
	fh, err := os.Open(chunked)
	require.NoError(t, err)
	x, err := recordio.LoadIndex(fh, int64(len(data)), chunked)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	require.Greater(t, len(x.Chunks), 3)
	victim := x.Chunks[2]
	data[victim.Offset+recordio.HeaderSize+3] ^= 0xff
	require.NoError(t, os.WriteFile(chunked, data, 0o644))

	var want []uint64
	for r := range 100 {
		if !bad[r] {
			want = append(want, messages.SampleID(0, r))
		}
	}
	for r := range 100 {
		if r < victim.FirstRecord || r >= victim.FirstRecord+int(victim.NumRecords) {
			want = append(want, messages.SampleID(1, r))
		}
	}
	files := actors.Files{Paths: []string{path, chunked}, Threads: 2}
	// With lanes, the skipped records are counted once, not once a lane:
	// every lane's End carries the deal stage's count.
	for _, run := range []struct {
		stages []actors.Stage
		lanes  int
	}{{[]actors.Stage{files, actors.Batch{Size: 8}}, 1}, {[]actors.Stage{files, actors.Shuffle{Window: 10, Seed: 3}, actors.Batch{Size: 18}}, 1},
		{[]actors.Stage{files, actors.Shuffle{Window: 10, Seed: 3}, actors.Batch{Size: 18}}, 3}} {
		sys := actors.NewSystem()
		p, err := actors.New(run.stages, actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt, Lanes: run.lanes})
		require.NoError(t, err)
		ids := readPass(t, ctx, p, nil)
		requireExactlyOnce(t, want, ids)
		require.EqualValues(t, len(bad)+int(victim.NumRecords), p.Stats().Skipped, "%d stages, %d lanes", len(run.stages), run.lanes)
		closeAndCheck(t, p, sys)
	}
}

func TestQueueSourceUnderPanics(t *testing.T) {
	for _, kind := range []string{"", actors.KindFileReader, actors.KindFiles, actors.KindBatch} {
		t.Run(kind, func(t *testing.T) {
			ctx := testutil.Context(t)
			q, err := readers.NewFeedQueue(4, nil)
			require.NoError(t, err)
			sys := actors.NewSystem()
			var inject faults.Injector
			if kind != "" {
				inject = faults.PanicAt{Kind: kind, N: 7}
			}
			p, err := actors.New([]actors.Stage{actors.Queue{Queue: q}, actors.Batch{Size: 3}}, actors.Options{System: sys, Faults: inject, GroupSize: 2})
			require.NoError(t, err)
			var wg sync.WaitGroup
			wg.Go(func() {
				for r := range 200 {
					if err := q.Push(ctx, testutil.Sample(0, r)); err != nil {
						return
					}
				}
				q.Close()
			})
			var vals []int64
			readPass(t, ctx, p, func(it actors.Item) {
				v, err := tensor.View[int64](it.Slots[0].Tensor)
				require.NoError(t, err)
				vals = append(vals, v...)
			})
			wg.Wait()
			require.Len(t, vals, 200)
			for i, v := range vals {
				require.EqualValues(t, i, v, "queue order")
			}
			closeAndCheck(t, p, sys)
		})
	}
}

func TestResetRefusedWhileReading(t *testing.T) {
	ctx := testutil.Context(t)
	q, err := readers.NewFeedQueue(4, nil)
	require.NoError(t, err)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Queue{Queue: q}}, actors.Options{System: sys})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := p.Next(ctx); done <- err }()
	actors.WaitReading(ctx, p)
	require.ErrorIs(t, p.Reset(), actors.ErrReadsInFlight)
	require.NoError(t, p.Close())
	require.ErrorIs(t, <-done, actors.ErrShutdown)
	_, err = p.Next(ctx)
	require.ErrorIs(t, err, actors.ErrShutdown)
	require.Empty(t, registered.Actors(sys))
}

// flakyOpen wraps OpenFile: the first reader of each file fails with EIO
// at record failAt; readers opened after that work.
func flakyOpen(failAt int) (func(context.Context, string) (readers.Reader, error), *int) {
	var mu sync.Mutex
	opened := map[string]int{}
	fails := 0
	return func(ctx context.Context, entry string) (readers.Reader, error) {
		r, err := actors.OpenFile(ctx, entry)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		opened[entry]++
		if opened[entry] > 1 {
			return r, nil
		}
		fails++
		return &eioAt{Reader: r, indexing: indexing{r}, left: failAt}, nil
	}, &fails
}

type eioAt struct {
	readers.Reader
	indexing
	left int
}

func (r *eioAt) Next(ctx context.Context) (tensor.Slots, error) {
	if r.left == 0 {
		return nil, &os.PathError{Op: "read", Path: "x", Err: syscall.EIO}
	}
	r.left--
	return r.Reader.Next(ctx)
}

func TestTransientErrorsAreRetried(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 150, 500)
	open, fails := flakyOpen(70)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 8}},
		actors.Options{System: sys, Open: open, Retry: supervisor.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 3}})
	require.NoError(t, err)
	l := drain(t, ctx, p)
	requireExactlyOnce(t, allIDs(2, 150), l.ids)
	require.Equal(t, 2, *fails)
	closeAndCheck(t, p, sys)
}

func TestMapStageRetriesAfterItsFunctionPanics(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 400)
	var mu sync.Mutex
	calls := 0
	double := func(s tensor.Slots) (tensor.Slots, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 4 {
			panic("map function failed once")
		}
		v, err := tensor.View[int64](s[0].Tensor)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = 2 * x
		}
		return tensor.Slots{{Tensor: tensor.MustFromSlice(s[0].Shape(), out)}, s[1]}, nil
	}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 10}, actors.Map{Fn: double}},
		actors.Options{System: sys})
	require.NoError(t, err)
	ids := readPass(t, ctx, p, func(it actors.Item) {
		v, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		for i, id := range it.IDs {
			f, r := messages.SplitID(id)
			require.Equal(t, 2*int64(f*1_000_000+r), v[i])
		}
	})
	require.Equal(t, allIDs(2, 100), ids, "ordered, each once")
	require.Equal(t, 1, p.Stats().Restarts)
	closeAndCheck(t, p, sys)
}

func TestDeviceStepPanicIsSteppedAgain(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 400)
	var mu sync.Mutex
	calls := 0
	var ids []uint64
	step := func(_ context.Context, it actors.Item) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 3 {
			panic("step failed once")
		}
		ids = append(ids, it.IDs...)
		return nil
	}
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 10}},
		actors.Devices{N: 2, Step: step}, actors.Options{System: sys})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	st := p.Stats()
	closeAndCheck(t, p, sys)
	requireExactlyOnce(t, allIDs(2, 100), ids)
	require.Equal(t, 1, st.Restarts)
	batches := 0
	for _, d := range st.Devices {
		batches += d.Batches
	}
	require.Equal(t, 20, batches)
}

func TestCorruptRecordsAtTheEndOfAFileAreCounted(t *testing.T) {
	ctx := testutil.Context(t)
	// With groups of 2, the last group holds only corrupt records.
	path := writeCorrupt(t, 10, map[int]bool{8: true, 9: true})
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Batch{Size: 3}},
		actors.Options{System: sys, OnCorrupt: supervisor.SkipCorrupt, GroupSize: 2})
	require.NoError(t, err)
	l := drain(t, ctx, p)
	requireExactlyOnce(t, allIDs(1, 8), l.ids)
	require.EqualValues(t, 2, p.Stats().Skipped)
	closeAndCheck(t, p, sys)
}

// A generator source (create_random_data_generator) never ends; every pass
// and every restart reads the same stream from its start.
func TestGeneratorSource(t *testing.T) {
	ctx := testutil.Context(t)
	gen := actors.Generator{Name: "random", New: func() (readers.Reader, error) {
		return readers.RandomData(readers.RandomOptions{Shapes: []tensor.Shape{{1, 3}}, Min: -1, Max: 1, Seed: 9})
	}}
	read := func(faults faults.Injector) []tensor.Slots {
		sys := actors.NewSystem()
		p, err := actors.New([]actors.Stage{gen, actors.Batch{Size: 4}}, actors.Options{System: sys, Faults: faults, GroupSize: 3})
		require.NoError(t, err)
		var passes []tensor.Slots
		for pass := range 2 {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			for range 10 {
				it, err := p.Next(ctx)
				require.NoError(t, err, "random data never ends")
				require.Equal(t, 4, it.Instances)
				passes = append(passes, it.Slots)
			}
		}
		closeAndCheck(t, p, sys)
		return passes
	}
	clean := read(nil)
	for i := range 10 {
		require.True(t, clean[i].Equal(clean[10+i]), "batch %d: every pass reads the stream from its start", i)
	}
	faulty := read(faults.PanicAt{Kind: actors.KindFileReader, N: 3})
	for i := range clean {
		require.True(t, clean[i].Equal(faulty[i]), "batch %d: a restarted reader resumes where it was", i)
	}
}

// Declared slots are checked on every record (PaddlePaddle Fluid's FileReader).
func TestFilesDeclaredSlotsAreChecked(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 20, 400)
	ok := []readers.SlotSpec{{Shape: tensor.Shape{-1, 1}, DType: tensor.Int64}, {Shape: tensor.Shape{-1, 1}, DType: tensor.Int32}}
	bad := []readers.SlotSpec{{Shape: tensor.Shape{-1, 2}, DType: tensor.Int64}, {Shape: tensor.Shape{-1, 1}, DType: tensor.Int32}}

	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Slots: ok}, actors.Batch{Size: 5}}, actors.Options{System: sys})
	require.NoError(t, err)
	require.Equal(t, allIDs(1, 20), drain(t, ctx, p).ids)
	closeAndCheck(t, p, sys)

	p, err = actors.New([]actors.Stage{actors.Files{Paths: paths, Slots: bad}, actors.Batch{Size: 5}}, actors.Options{System: sys})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.ErrorIs(t, err, tensor.ErrShape)
	var se *actors.StageError
	require.ErrorAs(t, err, &se)
	require.Equal(t, paths[0], se.File)
	require.EqualValues(t, 0, se.Record)
	closeAndCheck(t, p, sys)
}

func TestStageStats(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 400)
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 30, Seed: 1}, actors.Batch{Size: 10}},
		actors.Devices{N: 2}, actors.Options{System: sys, GroupSize: 8, Faults: faults.PanicAt{Kind: actors.KindBatch, N: 4}})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	byKind := map[string][]actors.StageStats{}
	for _, s := range p.StageStats() {
		byKind[s.Kind] = append(byKind[s.Kind], s)
		require.GreaterOrEqual(t, s.Held, 0)
		require.GreaterOrEqual(t, s.Demand, int64(0))
	}
	require.Len(t, byKind[actors.KindBatch], 1)
	batch := byKind[actors.KindBatch][0]
	// 200 samples in batches of 10, and maybe some of the next pass, read
	// ahead once this one ended.
	require.GreaterOrEqual(t, batch.Items, int64(20))
	require.Equal(t, 1, batch.Restarts, "the injected panic")
	require.Equal(t, "2-batch", batch.Stage)
	require.EqualValues(t, 20, byKind[actors.KindDoubleBuffer][0].Items, "routed to the lanes: the pass read ahead is not")
	consumed := int64(0)
	for _, d := range byKind[actors.KindDevice] {
		consumed += d.Items
		require.Zero(t, d.Held, "a finished pass leaves nothing queued")
	}
	require.EqualValues(t, 20, consumed)
	groups := int64(0)
	for _, r := range byKind[actors.KindFileReader] {
		groups += r.Items
	}
	require.GreaterOrEqual(t, groups, int64(2*13), "100 records in groups of 8: 13 groups a file (and the next pass read ahead)")
	closeAndCheck(t, p, sys)
}

// stallAt blocks at record stallAt of the first reader of each file until
// its context is cancelled, as a hung read would.
type stallAt struct {
	readers.Reader
	left int
}

// indexedStall is a stallAt that shows its file's chunk index.
type indexedStall struct {
	*stallAt
	indexing
}

// indexing passes a RecordFile's chunk index through a test's wrapper of
// it, so that the faults the wrapper injects hit the reads, not the
// indexing that building a pipeline does.
type indexing struct{ r readers.Reader }

func (i indexing) Index() (*recordio.Index, error) {
	return i.r.(interface {
		Index() (*recordio.Index, error)
	}).Index()
}

func (i indexing) SeekIndexed(x *recordio.Index, rec int) error {
	return i.r.(interface {
		SeekIndexed(*recordio.Index, int) error
	}).SeekIndexed(x, rec)
}

func (r *stallAt) Next(ctx context.Context) (tensor.Slots, error) {
	if r.left == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r.left--
	return r.Reader.Next(ctx)
}

// opens is an Options.Open that opens files with actors.OpenFile and
// counts the opens of each entry, giving wrap the reader of the n-th
// (from 1) to wrap in a fault.
type opens struct {
	wrap   func(ctx context.Context, entry string, n int, r readers.Reader) readers.Reader
	mu     sync.Mutex
	opened map[string]int
}

func (o *opens) open(ctx context.Context, entry string) (readers.Reader, error) {
	r, err := actors.OpenFile(ctx, entry)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.opened == nil {
		o.opened = map[string]int{}
	}
	o.opened[entry]++
	return o.wrap(ctx, entry, o.opened[entry], r), nil
}

// counts is how many times each entry was opened.
func (o *opens) counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.opened)
}

func TestStalledReadIsAbandoned(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 120, 500)
	o := &opens{wrap: func(_ context.Context, _ string, n int, r readers.Reader) readers.Reader {
		if n > 1 {
			return r
		}
		return indexedStall{&stallAt{Reader: r, left: 50}, indexing{r}}
	}}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 8}},
		actors.Options{System: sys, Open: o.open, ReadTimeout: 20 * time.Millisecond,
			Retry: supervisor.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 3}})
	require.NoError(t, err)
	requireExactlyOnce(t, allIDs(2, 120), drain(t, ctx, p).ids)
	require.Equal(t, map[string]int{paths[0]: 2, paths[1]: 2}, o.counts(), "each file reopened once, after its stall")
	closeAndCheck(t, p, sys)

	// A reader that stalls every time it is opened (here: while skipping to
	// its record) uses up the retries; the stall ends the pipeline, naming
	// the file. In the order, the file is read when the pipeline is built,
	// to count its records (the wrapper hides the chunk index), and the
	// stall ends the building.
	opts := actors.Options{System: sys, ReadTimeout: 20 * time.Millisecond, Retry: supervisor.Backoff{Attempts: 3, Initial: time.Millisecond},
		Open: func(ctx context.Context, entry string) (readers.Reader, error) {
			r, err := actors.OpenFile(ctx, entry)
			return &stallAt{Reader: r, left: 5}, err
		}}
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths[:1]}, actors.Batch{Size: 8}}, opts)
	require.ErrorIs(t, err, actors.ErrReadStalled)
	require.ErrorContains(t, err, paths[0])
	p, err = actors.New([]actors.Stage{actors.Files{Paths: paths[:1], AnyOrder: true}, actors.Batch{Size: 8}}, opts)
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.ErrorIs(t, err, actors.ErrReadStalled)
	require.ErrorContains(t, err, paths[0])
	closeAndCheck(t, p, sys)
}

// From the second pass on, the double buffer reads the next pass ahead
// while the device still steps the last batches of the current one: the
// last step of pass 1 waits until the batch stage has made a batch of pass
// 2, which only reading ahead can cause (nobody has called Reset yet).
func TestDoubleBufferReadsTheNextPassAhead(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 64, 4000)
	sys := actors.NewSystem()
	var pipeline atomic.Pointer[actors.Pipeline] // the step may run before New returns
	var mu sync.Mutex
	seen := map[int][]uint64{}
	step := func(sctx context.Context, it actors.Item) error {
		if it.Pass == 1 && it.Seq == 7 {
			for pipeline.Load() == nil || batchItems(pipeline.Load()) < 17 {
				if err := sctx.Err(); err != nil {
					return err
				}
				if ctx.Err() != nil {
					return errors.New("the next pass was not read ahead")
				}
				runtime.Gosched()
			}
		}
		mu.Lock()
		seen[it.Pass] = append(seen[it.Pass], it.IDs...)
		mu.Unlock()
		return nil
	}
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 8}, actors.DoubleBuffer{Window: 2}},
		actors.Devices{N: 1, Step: step}, actors.Options{System: sys})
	require.NoError(t, err)
	pipeline.Store(p)
	for pass := range 3 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		require.NoError(t, p.Run(ctx))
	}
	mu.Lock()
	require.Equal(t, allIDs(1, 64), seen[0])
	require.Equal(t, allIDs(1, 64), seen[1])
	require.Equal(t, allIDs(1, 64), seen[2], "the pass read ahead is delivered whole, in order, once")
	mu.Unlock()
	require.Zero(t, p.Stats().Restarts)
	closeAndCheck(t, p, sys)
}

func batchItems(p *actors.Pipeline) int64 {
	for _, s := range p.StageStats() {
		if s.Kind == actors.KindBatch {
			return s.Items
		}
	}
	return 0
}

// Records with a LoD slot do not stack (tensor.Stack): file readers send
// them as parts of one record each, the shuffle picks rows across them and
// the batch stage joins them on the general path. Every record arrives
// once, with its own sequence.
func TestRecordsThatDoNotStack(t *testing.T) {
	ctx := testutil.Context(t)
	const n = 90
	path := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "seq.rio"), 300, n, func(r int) tensor.Slots {
		seq := make([]int32, 1+r%3)
		for k := range seq {
			seq[k] = int32(r)
		}
		lt, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{len(seq), 1}, seq), tensor.LoD{{0, len(seq)}})
		require.NoError(t, err)
		return tensor.Slots{testutil.Sample(0, r)[0], lt}
	})

	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Shuffle{Window: 16, Seed: 3}, actors.Batch{Size: 7}},
		actors.Options{System: sys, GroupSize: 4})
	require.NoError(t, err)
	ids := readPass(t, ctx, p, func(it actors.Item) {
		checkAligned(t, it)
		seqs := it.Slots[1]
		require.Len(t, seqs.LoD, 1)
		vals, err := tensor.View[int32](seqs.Tensor)
		require.NoError(t, err)
		for i, id := range it.IDs {
			_, r := messages.SplitID(id)
			lo, hi := seqs.LoD[0][i], seqs.LoD[0][i+1]
			require.Equal(t, 1+r%3, hi-lo, "sequence of record %d", r)
			for _, v := range vals[lo:hi] {
				require.EqualValues(t, r, v)
			}
		}
	})
	requireExactlyOnce(t, allIDs(1, n), ids)
	require.False(t, slices.IsSorted(ids), "shuffled")
	closeAndCheck(t, p, sys)
}

// groupCounts records how many records each group a file reader sends
// carries.
type groupCounts struct {
	mu     sync.Mutex
	counts []uint64
}

func (g *groupCounts) BeforeMessage(_, kind string, _ int64, msg any) {
	if b, ok := msg.(*messages.Batch); ok && kind == actors.KindFiles && b.Count > 0 {
		g.mu.Lock()
		g.counts = append(g.counts, b.Count)
		g.mu.Unlock()
	}
}

// A group of large samples holds as many as fit Options.GroupBytes, not
// GroupSize: its block is allocated for that many (128 decoded images of
// 150 KB made 19 MB blocks, zeroed in full).
func TestGroupsOfLargeSamplesStayWithinGroupBytes(t *testing.T) {
	const n, image = 40, 4096
	path := testutil.WriteRecords(t, filepath.Join(t.TempDir(), "large.rio"), 0, n, func(r int) tensor.Slots {
		img := make([]uint8, image)
		img[0] = uint8(r)
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r)})},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, image}, img)}}
	})
	sys := actors.NewSystem()
	seen := &groupCounts{}
	// Three records (8 + 4096 bytes each) fit 16 KiB.
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Batch{Size: 8}},
		actors.Options{System: sys, GroupBytes: 16 << 10, Faults: seen})
	require.NoError(t, err)
	ids := readPass(t, testutil.Context(t), p, nil)
	closeAndCheck(t, p, sys)
	requireExactlyOnce(t, allIDs(1, n), ids)
	var total uint64
	for _, c := range seen.counts {
		require.LessOrEqual(t, c, uint64(3), "records in a group")
		total += c
	}
	require.GreaterOrEqual(t, total, uint64(n))
}

// A map of Samples sees its item's epoch and ids (before the batch stage
// and after it, in an xmap and a map), and can name a sample.
func TestSampleMapsSeeTheirEpochAndSamples(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 400)
	var mu sync.Mutex
	var named []string
	stamp := func(s actors.Samples, slots tensor.Slots) (tensor.Slots, error) {
		out := make([]int64, len(s.IDs))
		for i, id := range s.IDs {
			out[i] = int64(s.Epoch)<<50 | int64(id)
		}
		mu.Lock()
		named = append(named, s.Name(s.IDs[0]))
		mu.Unlock()
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{len(out), 1}, out)}, slots[1]}, nil
	}
	for _, chain := range [][]actors.Stage{
		{actors.Files{Paths: paths}, actors.Shuffle{Window: 50, Seed: 2}, actors.Batch{Size: 10}, actors.Map{Samples: stamp}},
		{actors.Files{Paths: paths}, actors.Shuffle{Window: 50, Seed: 2}, actors.XMap{Samples: stamp, Workers: 2}, actors.Batch{Size: 10}},
	} {
		sys := actors.NewSystem()
		p, err := actors.New(chain, actors.Options{System: sys})
		require.NoError(t, err)
		checked := passItems(t, ctx, p, 2, func(it actors.Item) int {
			v, err := tensor.View[int64](it.Slots[0].Tensor)
			require.NoError(t, err)
			for i, id := range it.IDs {
				require.Equal(t, int64(it.Epoch)<<50|int64(id), v[i])
			}
			return it.Epoch
		})
		require.Equal(t, 0, checked[0][0])
		require.Equal(t, 1, checked[1][0])
		closeAndCheck(t, p, sys)
	}
	require.Contains(t, named[0], "record ")
	require.Contains(t, named[0], ".rio")
	_, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Map{Fn: func(s tensor.Slots) (tensor.Slots, error) { return s, nil }, Samples: stamp}},
		actors.Options{})
	require.ErrorIs(t, err, actors.ErrBadSpec)
}
