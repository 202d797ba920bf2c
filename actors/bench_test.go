package actors_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/internal/harness/benchmark"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/tensor"
)

// Benchmarks of the pipeline file -> shuffle -> batch(64) -> double buffer
// -> device on Fashion-MNIST-sized samples (a [1,28,28] uint8 image and an
// int64 label; 60,000 of them, Fashion-MNIST's training set, as actorfeed
// bench), against a hand-written goroutine-and-channel pipeline doing the
// same stages in the same run. Both report samples/s and allocations;
// BenchmarkPipelineRatio alternates them pass by pass and reports the
// ratio of their throughputs, which drifting machine load does not skew:
//
//	go test -run '^$' -bench 'Pipeline' -benchmem -count 5 ./actors

const (
	benchSamples = 60_000
	benchWindow  = 1024
	benchBatch   = 64
)

func benchFile(b *testing.B) string {
	b.Helper()
	return testutil.WriteRecords(b, filepath.Join(b.TempDir(), "bench.rio"), 0, benchSamples, benchSample)
}

// writeBench writes file f of 16 that share the benchmarks' samples.
func writeBench(b *testing.B, f int) string {
	return testutil.WriteRecords(b, filepath.Join(b.TempDir(), fmt.Sprintf("part-%02d.rio", f)), 0, benchSamples/16, benchSample)
}

// benchSample is sample r of the benchmarks' files.
func benchSample(r int) tensor.Slots {
	img := make([]uint8, 784)
	img[0], img[1] = uint8(r), uint8(r>>8)
	return tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r % 10)})},
	}
}

// consume is the simulated device's work on a batch: it reads every image
// byte, so that no pipeline can skip materialising the data.
func consume(s tensor.Slots) { baseline.Touch(s[0].Bytes()) }

// The actor pipeline is measured three ways: "fresh" and "recycled" are
// passes of one running pipeline (Reset between them, as a trainer runs
// epochs; the first, untimed, spawns it), with fresh batch storage and with
// Devices.Recycle; "new" builds a new pipeline for every pass, with fresh
// storage, and so also pays for spawning its actors and filling its windows;
// "anyorder" is "fresh" without the order (Files.AnyOrder), the pipeline
// the order's cost is measured against.
var actorModes = []struct {
	name                       string
	recycle, running, anyOrder bool
}{{"fresh", false, true, false}, {"recycled", true, true, false}, {"new", false, false, false}, {"anyorder", false, true, true}}

// actorRun returns a function that runs one pass of the actor pipeline in
// the given mode and checks that its device got every sample, and a
// function that stops it.
func actorRun(b *testing.B, sys *actor.ActorSystem, path string, recycle, running, anyOrder bool) (pass func(), stop func()) {
	cfg := benchmark.Config{Path: path, Window: benchWindow, Batch: benchBatch, System: sys, AnyOrder: anyOrder}
	// The device's goroutine counts; a pipeline steps from the moment it
	// exists, so the count is reset before a pass can begin: before the
	// pipeline is built, and before each Reset.
	var stepped atomic.Int64
	step := func(s tensor.Slots) {
		consume(s)
		n, _ := s.Instances()
		stepped.Add(int64(n))
	}
	if !running {
		return func() {
			stepped.Store(0)
			_, _, err := cfg.Pass(context.Background(), recycle, step)
			require.NoError(b, err)
			require.Equal(b, int64(benchSamples), stepped.Load())
		}, func() {}
	}
	r, err := cfg.Start(recycle, step)
	require.NoError(b, err)
	pass = func() {
		_, err := r.Pass(context.Background())
		require.NoError(b, err)
		require.Equal(b, int64(benchSamples), stepped.Load())
		stepped.Store(0)
	}
	pass() // spawns it and fills its windows, untimed
	return pass, func() { require.NoError(b, r.Close()) }
}

func BenchmarkPipelineActors(b *testing.B) {
	path := benchFile(b)
	sys := actors.NewSystem()
	for _, m := range actorModes {
		b.Run(m.name, func(b *testing.B) {
			pass, stop := actorRun(b, sys, path, m.recycle, m.running, m.anyOrder)
			defer stop()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				pass()
			}
			b.ReportMetric(float64(b.N*benchSamples)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkPipelineRatio runs a pass of each pipeline per iteration, taking
// turns at going first, and reports the actor pipeline's throughput as a
// fraction of the hand-written ones': "ratio" against baseline.Stacked,
// which reads as the actor pipeline does and makes batches the same way
// (fresh or recycled), which is the actors' own overhead, and
// "ratio-per-record" against baseline.Channels (a record at a time, as a
// user would write it). One sub-benchmark per mode of actorModes.
func BenchmarkPipelineRatio(b *testing.B) {
	path := benchFile(b)
	sys := actors.NewSystem()
	for _, m := range actorModes {
		b.Run(m.name, func(b *testing.B) { pipelineRatio(b, sys, path, m.recycle, m.running, m.anyOrder) })
	}
}

func pipelineRatio(b *testing.B, sys *actor.ActorSystem, path string, recycle, running, anyOrder bool) {
	pass, stop := actorRun(b, sys, path, recycle, running, anyOrder)
	defer stop()
	var inActors, inStacked, inChannels time.Duration
	timed := func(d *time.Duration, run func()) { timedRun(b, d, run) }
	runs := []func(){
		func() { timed(&inActors, pass) },
		func() {
			timed(&inStacked, func() {
				n, err := stackedPipeline(context.Background(), path, recycle)
				require.NoError(b, err)
				require.Equal(b, benchSamples, n)
			})
		},
		func() {
			timed(&inChannels, func() {
				n, err := channelPipeline(context.Background(), path)
				require.NoError(b, err)
				require.Equal(b, benchSamples, n)
			})
		},
	}
	b.ResetTimer()
	for i := range b.N {
		for k := range runs { // each takes its turn at going first
			runs[(i+k)%len(runs)]()
		}
	}
	samples := float64(b.N * benchSamples)
	b.ReportMetric(inStacked.Seconds()/inActors.Seconds(), "ratio")
	b.ReportMetric(inChannels.Seconds()/inActors.Seconds(), "ratio-per-record")
	b.ReportMetric(samples/inActors.Seconds(), "actors-samples/s")
	b.ReportMetric(samples/inStacked.Seconds(), "stacked-samples/s")
	b.ReportMetric(samples/inChannels.Seconds(), "channels-samples/s")
}

// channelPipeline is the per-record baseline: one goroutine per stage,
// channels between them, the same shuffle window and batching.
func channelPipeline(ctx context.Context, path string) (int, error) {
	return baseline.Channels(ctx, []string{path}, benchWindow, benchBatch, 1, func(s tensor.Slots) { consume(s) })
}

// stackedPipeline is the same on the actor pipeline's read path.
func stackedPipeline(ctx context.Context, path string, recycle bool) (int, error) {
	return baseline.Stacked(ctx, []string{path}, baseline.StackedOptions{Window: benchWindow, Batch: benchBatch,
		Group: actors.DefaultGroupSize, GroupBytes: actors.DefaultGroupBytes, Seed: 1, Recycle: recycle}, func(s tensor.Slots) { consume(s) })
}

func BenchmarkPipelineStacked(b *testing.B) {
	for _, recycle := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "recycled"}[recycle], func(b *testing.B) {
			benchBaseline(b, func(ctx context.Context, path string) (int, error) { return stackedPipeline(ctx, path, recycle) })
		})
	}
}

func BenchmarkPipelineChannels(b *testing.B) { benchBaseline(b, channelPipeline) }

func benchBaseline(b *testing.B, run func(context.Context, string) (int, error)) {
	path := benchFile(b)
	b.ReportAllocs()
	b.ResetTimer()
	samples := 0
	for range b.N {
		n, err := run(context.Background(), path)
		require.NoError(b, err)
		require.Equal(b, benchSamples, n)
		samples += n
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkDevice is what a device sees, as `actorfeed bench` reports it
// (package benchmark): busy fraction over the warm passes with a step twice
// the pipeline's time per batch, the longest wait at a warm pass boundary
// and the mean wait, in batches of 1024 (a step of a few ms, which a timer
// can simulate), and the time to the first batch of 64. One iteration is one
// measurement:
//
//	go test -run '^$' -bench 'Device|Memory' -benchtime 3x ./actors
func BenchmarkDevice(b *testing.B) {
	path := benchFile(b)
	sys := actors.NewSystem()
	small := benchmark.Config{Path: path, Window: benchWindow, Batch: benchBatch, System: sys}
	large := small
	large.Batch = 1024
	var busy float64
	var boundary, mean, first, step time.Duration
	for range b.N {
		d, err := large.Device(context.Background(), 3)
		require.NoError(b, err)
		_, f, err := small.Pass(context.Background(), false, consume)
		require.NoError(b, err)
		busy += d.Busy
		boundary, mean, first = max(boundary, d.Boundary), mean+benchmark.Mean(d.Waits), first+f
		step += d.StepTaken
	}
	n := float64(b.N)
	b.ReportMetric(100*busy/n, "busy-%")
	b.ReportMetric(float64(boundary.Microseconds()), "max-boundary-wait-µs")
	b.ReportMetric(float64(step.Microseconds())/n, "step-µs")
	b.ReportMetric(float64(mean.Microseconds())/n, "mean-wait-µs")
	b.ReportMetric(float64(first.Microseconds())/n, "first-batch-µs")
}

// BenchmarkMemory runs 50 passes on one pipeline and reports allocations
// per batch and the heap after the first, the median and the last pass.
func BenchmarkMemory(b *testing.B) {
	path := benchFile(b)
	cfg := benchmark.Config{Path: path, Window: benchWindow, Batch: benchBatch, System: actors.NewSystem()}
	for range b.N {
		m, err := cfg.Memory(context.Background(), 50, consume)
		require.NoError(b, err)
		sorted := slices.Clone(m.Heap)
		slices.Sort(sorted)
		b.ReportMetric(m.AllocsPerBatch, "allocs/batch")
		b.ReportMetric(float64(m.Heap[0])/1e6, "heap-first-MB")
		b.ReportMetric(float64(sorted[len(sorted)/2])/1e6, "heap-median-MB")
		b.ReportMetric(float64(m.Heap[len(m.Heap)-1])/1e6, "heap-last-MB")
		b.ReportMetric(float64(m.PeakLive), "peak-live-batches")
	}
}

// BenchmarkOrderCost runs a pass of a pipeline in the order and one of the
// same pipeline in any order (Files.AnyOrder) per iteration, taking turns at
// going first, each from a collected heap, and reports the first's
// throughput as a fraction of the second's ("ratio"): the order's cost.
// Three pipelines: the benchmarks' own (one file, a shuffle window of
// 1,024, batches of 64); the same over 16 files; and without a shuffle.
func BenchmarkOrderCost(b *testing.B) {
	one := []string{benchFile(b)}
	var sixteen []string
	for f := range 16 {
		sixteen = append(sixteen, writeBench(b, f))
	}
	for _, c := range []struct {
		name   string
		paths  []string
		window int
	}{{"one-file", one, benchWindow}, {"16-files", sixteen, benchWindow}, {"no-shuffle", one, 0}} {
		b.Run(c.name, func(b *testing.B) {
			inOrder, anyOrder := orderRun(b, c.paths, c.window, false), orderRun(b, c.paths, c.window, true)
			var tOrder, tAny time.Duration
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					timedRun(b, &tOrder, inOrder)
					timedRun(b, &tAny, anyOrder)
				} else {
					timedRun(b, &tAny, anyOrder)
					timedRun(b, &tOrder, inOrder)
				}
			}
			b.ReportMetric(tAny.Seconds()/tOrder.Seconds(), "ratio")
			b.ReportMetric(float64(b.N*benchSamples)/tOrder.Seconds(), "order-samples/s")
			b.ReportMetric(float64(b.N*benchSamples)/tAny.Seconds(), "any-samples/s")
		})
	}
}

// orderRun returns a function that runs a pass of a running pipeline over
// paths (a shuffle of window, unless 0, batches of 64, a double buffer, a
// device that reads every image byte) and checks that every sample came.
// Its first pass, which spawns it, runs untimed here.
func orderRun(b *testing.B, paths []string, window int, anyOrder bool) func() {
	stages := []actors.Stage{actors.Files{Paths: paths, AnyOrder: anyOrder}}
	if window > 0 {
		stages = append(stages, actors.Shuffle{Window: window, Seed: 1})
	}
	var stepped atomic.Int64
	p, err := actors.NewDevices(append(stages, actors.Batch{Size: benchBatch}, actors.DoubleBuffer{}),
		actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error {
			consume(it.Slots)
			stepped.Add(int64(it.Instances))
			return nil
		}}, actors.Options{System: sharedSys})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Close()) })
	passes := 0
	pass := func() {
		// The device steps a pass's batches from its Reset on: the count
		// starts over before it.
		if passes++; passes > 1 {
			require.NoError(b, p.Reset())
		}
		require.NoError(b, p.Run(context.Background()))
		require.Equal(b, int64(benchSamples), stepped.Load())
		stepped.Store(0)
	}
	pass()
	return pass
}

// timedRun adds run's time to d. It starts from a collected heap, so that
// no run pays for the garbage of the one before it.
func timedRun(b *testing.B, d *time.Duration, run func()) {
	b.StopTimer()
	runtime.GC()
	b.StartTimer()
	start := time.Now()
	run()
	*d += time.Since(start)
}

// BenchmarkParallelRatio runs a pass of a new actor pipeline over 16 files
// feeding 4 devices, and a pass of baseline.Parallel doing the same work,
// both with one lane per core (GOMAXPROCS), per iteration, taking turns at
// going first. "ratio" is the actor pipeline's throughput as a fraction of
// the parallel baseline's: run it with -cpu 1,2 (and more where the machine
// has them) to see how each scales with the cores.
//
//	go test -run '^$' -bench 'ParallelRatio' -cpu 1,2 -count 5 ./actors
func BenchmarkParallelRatio(b *testing.B) {
	paths := make([]string, 16)
	for f := range paths {
		paths[f] = writeBench(b, f)
	}
	const devices = 4
	cfg := benchmark.Config{Paths: paths, Window: benchWindow, Batch: benchBatch, System: actors.NewSystem(), Devices: devices,
		Lanes: runtime.GOMAXPROCS(0)}
	par := baseline.ParallelOptions{StackedOptions: baseline.StackedOptions{Window: benchWindow, Batch: benchBatch, Group: actors.DefaultGroupSize,
		GroupBytes: actors.DefaultGroupBytes, Seed: 1}, Lanes: runtime.GOMAXPROCS(0), Devices: devices}
	var inActors, inParallel time.Duration
	runs := []func(){
		func() {
			timedRun(b, &inActors, func() {
				_, _, err := cfg.Pass(context.Background(), false, consume)
				require.NoError(b, err)
			})
		},
		func() {
			timedRun(b, &inParallel, func() {
				n, err := baseline.Parallel(context.Background(), paths, par, func(_ int, s tensor.Slots) { consume(s) })
				require.NoError(b, err)
				require.Equal(b, benchSamples, n)
			})
		},
	}
	b.ResetTimer()
	for i := range b.N {
		for k := range runs {
			runs[(i+k)%len(runs)]()
		}
	}
	samples := float64(b.N * benchSamples)
	b.ReportMetric(inParallel.Seconds()/inActors.Seconds(), "ratio")
	b.ReportMetric(samples/inActors.Seconds(), "actors-samples/s")
	b.ReportMetric(samples/inParallel.Seconds(), "parallel-samples/s")
}
