package actors_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// Benchmarks of the pipeline file -> shuffle -> batch(64) -> double buffer
// -> device on Fashion-MNIST-sized samples (a [1,28,28] uint8 image and an
// int64 label), against a hand-written goroutine-and-channel pipeline doing
// the same stages in the same run. Both report samples/s; compare with
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

func BenchmarkPipelineActors(b *testing.B) {
	path := benchFile(b)
	ctx := context.Background()
	sys := actors.NewSystem()
	b.ReportAllocs()
	b.ResetTimer()
	samples := 0
	for range b.N {
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Shuffle{Window: benchWindow, Seed: 1},
			actors.Batch{Size: benchBatch}, actors.DoubleBuffer{Window: 2}},
			actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error { consume(it.Slots); return nil }},
			actors.Options{System: sys})
		require.NoError(b, err)
		require.NoError(b, p.Run(ctx))
		for _, d := range p.Stats().Devices {
			samples += d.Instances
		}
		require.NoError(b, p.Close())
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}

// channelPipeline is the baseline: one goroutine per stage, channels
// between them, the same decoding, shuffle window and batching.
func channelPipeline(ctx context.Context, path string) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := readers.OpenRecordFile(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	records := make(chan tensor.Slots, 64)
	shuffled := make(chan tensor.Slots, 64)
	batches := make(chan tensor.Slots, 2) // the double buffer
	errc := make(chan error, 3)
	go func() {
		defer close(records)
		for {
			s, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				errc <- err
				return
			}
			select {
			case records <- s:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer close(shuffled)
		rng := rand.New(rand.NewPCG(1, 0))
		buf := make([]tensor.Slots, 0, benchWindow)
		flush := func() bool {
			rng.Shuffle(len(buf), func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
			for _, s := range buf {
				select {
				case shuffled <- s:
				case <-ctx.Done():
					return false
				}
			}
			buf = buf[:0]
			return true
		}
		for s := range records {
			if buf = append(buf, s); len(buf) == benchWindow && !flush() {
				return
			}
		}
		flush()
	}()
	go func() {
		defer close(batches)
		pending := make([]tensor.Slots, 0, benchBatch)
		emit := func() bool {
			out, err := tensor.Concat(pending)
			if err != nil {
				errc <- err
				return false
			}
			pending = pending[:0]
			select {
			case batches <- out:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for s := range shuffled {
			if pending = append(pending, s); len(pending) == benchBatch && !emit() {
				return
			}
		}
		if len(pending) > 0 {
			emit()
		}
	}()
	n := 0
	for bt := range batches {
		consume(bt)
		k, _ := bt.Instances()
		n += k
	}
	select {
	case err := <-errc:
		return n, err
	default:
		return n, nil
	}
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
