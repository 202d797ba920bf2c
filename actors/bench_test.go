package actors_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/actors/baseline"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// Benchmarks of the pipeline file -> shuffle -> batch(64) -> double buffer
// -> device on Fashion-MNIST-sized samples (a [1,28,28] uint8 image and an
// int64 label), against a hand-written goroutine-and-channel pipeline doing
// the same stages in the same run. Both report samples/s and allocations;
// BenchmarkPipelineRatio alternates them pass by pass and reports the
// ratio of their throughputs, which drifting machine load does not skew:
//
//	go test -run '^$' -bench 'Pipeline' -benchmem -count 5 ./actors

const (
	benchSamples = 20_000
	benchWindow  = 1024
	benchBatch   = 64
)

func benchFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.rio")
	fh, err := os.Create(path)
	require.NoError(b, err)
	w, err := recordio.NewWriter(fh, recordio.WriterOptions{})
	require.NoError(b, err)
	img := make([]uint8, 784)
	for r := range benchSamples {
		img[0], img[1] = uint8(r), uint8(r>>8)
		rec, err := tensor.Encode(tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r % 10)})},
		})
		require.NoError(b, err)
		require.NoError(b, w.Write(rec))
	}
	require.NoError(b, w.Close())
	require.NoError(b, fh.Close())
	return path
}

// consume is the simulated device's work on a batch: it touches every byte
// so that no pipeline can skip materialising the data.
func consume(s tensor.Slots) int {
	sum := 0
	for _, b := range s[0].Bytes() {
		sum += int(b)
	}
	return sum
}

// actorPipeline runs one pass of the actor pipeline and returns the samples
// its device consumed.
func actorPipeline(b *testing.B, sys *actor.ActorSystem, path string, recycle bool) int {
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Shuffle{Window: benchWindow, Seed: 1},
		actors.Batch{Size: benchBatch}, actors.DoubleBuffer{Window: 2}},
		actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error { consume(it.Slots); return nil }, Recycle: recycle},
		actors.Options{System: sys})
	require.NoError(b, err)
	require.NoError(b, p.Run(context.Background()))
	n := 0
	for _, d := range p.Stats().Devices {
		n += d.Instances
	}
	require.NoError(b, p.Close())
	require.Equal(b, benchSamples, n)
	return n
}

func BenchmarkPipelineActors(b *testing.B) {
	for _, recycle := range []bool{false, true} {
		name := "fresh"
		if recycle {
			name = "recycled"
		}
		b.Run(name, func(b *testing.B) {
			path := benchFile(b)
			sys := actors.NewSystem()
			b.ReportAllocs()
			b.ResetTimer()
			samples := 0
			for range b.N {
				samples += actorPipeline(b, sys, path, recycle)
			}
			b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkPipelineRatio runs a pass of each pipeline per iteration, taking
// turns at going first, and reports the actor pipeline's throughput as a
// fraction of the channel pipeline's: with fresh storage for every batch,
// as the channel pipeline, and with Devices.Recycle.
func BenchmarkPipelineRatio(b *testing.B) {
	b.Run("fresh", func(b *testing.B) { pipelineRatio(b, false) })
	b.Run("recycled", func(b *testing.B) { pipelineRatio(b, true) })
}

func pipelineRatio(b *testing.B, recycle bool) {
	path := benchFile(b)
	sys := actors.NewSystem()
	var inActors, inChannels time.Duration
	timed := func(d *time.Duration, run func()) {
		start := time.Now()
		run()
		*d += time.Since(start)
	}
	runActors := func() { actorPipeline(b, sys, path, recycle) }
	runChannels := func() {
		n, err := channelPipeline(context.Background(), path)
		require.NoError(b, err)
		require.Equal(b, benchSamples, n)
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(&inActors, runActors)
			timed(&inChannels, runChannels)
		} else {
			timed(&inChannels, runChannels)
			timed(&inActors, runActors)
		}
	}
	samples := float64(b.N * benchSamples)
	b.ReportMetric(inChannels.Seconds()/inActors.Seconds(), "ratio")
	b.ReportMetric(samples/inActors.Seconds(), "actors-samples/s")
	b.ReportMetric(samples/inChannels.Seconds(), "channels-samples/s")
}

// channelPipeline is the baseline: one goroutine per stage, channels
// between them, the same decoding, shuffle window and batching.
func channelPipeline(ctx context.Context, path string) (int, error) {
	return baseline.Channels(ctx, []string{path}, benchWindow, benchBatch, 1, func(s tensor.Slots) { consume(s) })
}

func BenchmarkPipelineChannels(b *testing.B) {
	path := benchFile(b)
	b.ReportAllocs()
	b.ResetTimer()
	samples := 0
	for range b.N {
		n, err := channelPipeline(context.Background(), path)
		require.NoError(b, err)
		require.Equal(b, benchSamples, n)
		samples += n
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}
