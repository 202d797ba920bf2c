// Command gomlx compares actorfeed with a Go peer, gomlx's dataset pipeline
// (github.com/gomlx/gomlx, pkg/ml/datasets, pure Go with the simplego
// backend), on the same work in the same run: read Fashion-MNIST-sized
// RecordIO records (a 784-byte image and an int64 label), shuffle over a
// window, batch, read ahead, and hand each batch to a consumer that reads
// every image byte. It lives in a module of its own so that gomlx's
// dependencies never enter actorfeed's go.mod.
//
//	cd bench/gomlx && go run . [-samples N] [-repeat R]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/datasets"
	"github.com/gomlx/gomlx/pkg/ml/train"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

const (
	window = 1024
	batch  = 64
)

func main() {
	samples := flag.Int("samples", 20000, "samples in the file")
	repeat := flag.Int("repeat", 5, "runs of each pipeline (medians are reported)")
	flag.Parse()
	if err := run(*samples, *repeat); err != nil {
		fmt.Fprintln(os.Stderr, "gomlx bench:", err)
		os.Exit(1)
	}
}

func run(samples, repeat int) error {
	dir, err := os.MkdirTemp("", "actorfeed-gomlx-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "data.recordio")
	if err := write(path, samples); err != nil {
		return err
	}
	backend, err := simplego.New("")
	if err != nil {
		return err
	}
	ctx := context.Background()
	times := map[string][]time.Duration{}
	pipelines := []struct {
		name string
		run  func() (int, error)
	}{
		{"channel pipeline (internal/baseline)", func() (int, error) {
			return baseline.Channels(ctx, []string{path}, window, batch, 1, func(s tensor.Slots) { touch(s[0].Bytes()) })
		}},
		{"actor pipeline", func() (int, error) { return actorPipeline(ctx, path) }},
		{"gomlx datasets (simplego)", func() (int, error) { return gomlxPipeline(backend, path) }},
	}
	for range repeat {
		for _, p := range pipelines {
			start := time.Now()
			n, err := p.run()
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if n != samples {
				return fmt.Errorf("%s delivered %d samples of %d", p.name, n, samples)
			}
			times[p.name] = append(times[p.name], time.Since(start))
		}
	}
	fmt.Printf("%d samples, shuffle %d, batch %d, read-ahead 2; medians of %d runs, taking turns\n", samples, window, batch, repeat)
	actor := median(times["actor pipeline"])
	for _, p := range pipelines {
		m := median(times[p.name])
		fmt.Printf("%-36s %10.0f samples/s   actor pipeline is %.2fx this\n", p.name, float64(samples)/m.Seconds(), m.Seconds()/actor.Seconds())
	}
	return nil
}

func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

var sink uint64

// touch is the simulated device's work, the same in every pipeline.
func touch(b []byte) { sink += baseline.Touch(b) }

func write(path string, n int) error {
	img := make([]uint8, 784) // each record is encoded before the next is made
	_, err := readers.WriteRecordFile(path, recordio.WriterOptions{}, readers.Samples(n, func(r int) (tensor.Slots, error) {
		img[0], img[1] = uint8(r), uint8(r>>8)
		return tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r % 10)})},
		}, nil
	}))
	return err
}

func actorPipeline(ctx context.Context, path string) (int, error) {
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: []string{path}}, actors.Shuffle{Window: window, Seed: 1},
		actors.Batch{Size: batch}, actors.DoubleBuffer{Window: 2}},
		actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error { touch(it.Slots[0].Bytes()); return nil }},
		actors.Options{})
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if err := p.Run(ctx); err != nil {
		return 0, err
	}
	return p.Stats().Devices[0].Instances, nil
}

// recordDataset is a gomlx train.Dataset of the file's records, shuffled
// over a window as the other pipelines do: gomlx has no windowed shuffle
// for streamed data, so it is written here, in the dataset.
type recordDataset struct {
	path string
	r    *readers.RecordFile
	rng  *rand.Rand
	buf  []tensor.Slots
	eof  bool
}

func (d *recordDataset) Name() string { return "recordio" }

func (d *recordDataset) Reset() {
	if d.r != nil {
		d.r.Close()
	}
	d.r, d.buf, d.eof = nil, nil, false
}

func (d *recordDataset) Yield() (spec any, inputs, labels []*tensors.Tensor, err error) {
	if d.r == nil {
		if d.r, err = readers.OpenRecordFile(d.path); err != nil {
			return nil, nil, nil, err
		}
		d.rng = rand.New(rand.NewPCG(1, 0))
	}
	for len(d.buf) == 0 {
		if d.eof {
			return nil, nil, nil, io.EOF
		}
		for len(d.buf) < window {
			s, err := d.r.Next(context.Background())
			if errors.Is(err, io.EOF) {
				d.eof = true
				break
			}
			if err != nil {
				return nil, nil, nil, err
			}
			d.buf = append(d.buf, s)
		}
		d.rng.Shuffle(len(d.buf), func(i, j int) { d.buf[i], d.buf[j] = d.buf[j], d.buf[i] })
	}
	s := d.buf[len(d.buf)-1]
	d.buf = d.buf[:len(d.buf)-1]
	label, _ := tensor.View[int64](s[1].Tensor)
	return nil, []*tensors.Tensor{tensors.FromFlatDataAndDimensions(s[0].Bytes(), 28, 28)},
		[]*tensors.Tensor{tensors.FromFlatDataAndDimensions(label, 1)}, nil
}

func gomlxPipeline(backend backends.Backend, path string) (int, error) {
	var ds train.Dataset = &recordDataset{path: path}
	ds = datasets.Batch(backend, ds, batch, true, false)
	ds = datasets.ReadAhead(ds, 2)
	n := 0
	for {
		_, inputs, labels, err := ds.Yield()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		tensors.ConstFlatData(inputs[0], func(flat []uint8) { touch(flat) })
		n += inputs[0].Shape().Dimensions[0]
		for _, t := range append(inputs, labels...) {
			t.FinalizeAll()
		}
	}
}
