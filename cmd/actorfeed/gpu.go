package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/actors/cuda"
)

// gpus are run --device cuda's devices: device actor d steps on GPU d mod
// the machine's GPUs, with a stream of its own, and the batches are made
// in page-locked memory.
type gpus struct{ devs []*cuda.Device }

// openGPUs opens a cuda.Device for each of n device actors.
func openGPUs(n int) (*gpus, error) {
	count, err := cuda.Count()
	if err == nil && count == 0 {
		err = errors.New("the CUDA driver sees no GPU")
	}
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	g := &gpus{}
	for d := range n {
		dev, err := cuda.Open(d % count)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("--device cuda: device %d: %w", d, err)
		}
		g.devs = append(g.devs, dev)
	}
	return g, nil
}

// step is the devices' step: the batch goes to the device actor's GPU.
func (g *gpus) step(ctx context.Context, it actors.Item) error {
	return g.devs[actors.DeviceFrom(ctx)].Step(ctx, it)
}

// storage is where the batch stage makes batches: page-locked memory.
func (g *gpus) storage() actors.Storage { return g.devs[0].Storage() }

// report says what reached the GPUs: bytes and the GPUs' checksum.
func (g *gpus) report(out io.Writer) error {
	var bytes int64
	var sum uint64
	for _, d := range g.devs {
		s, err := d.Checksum()
		if err != nil {
			return err
		}
		bytes, sum = bytes+d.Bytes(), sum+s
	}
	fmt.Fprintf(out, "gpu: %s: %d bytes copied to %d stream(s), checksum %d\n", g.devs[0].Name(), bytes, len(g.devs), sum)
	return nil
}

// close closes the devices; the pipeline, which frees its storage through
// them, is closed first.
func (g *gpus) close() {
	for _, d := range g.devs {
		d.Close()
	}
}

// gpuCounts are what the devices' GPUs took so far.
type gpuCounts struct {
	bytes int64
	busy  time.Duration
}

func (g *gpus) counts() gpuCounts {
	var c gpuCounts
	for _, d := range g.devs {
		c.bytes += d.Bytes()
		c.busy += d.Busy()
	}
	return c
}

// cellLine says what the GPUs took in a cell of bench's matrix since
// before, over the actor pipelines' runs: their bytes a second, against a
// plain copy of page-locked memory measured now, and how busy the streams
// were.
func (g *gpus) cellLine(cell string, before gpuCounts, runs ...[]time.Duration) (string, error) {
	rate, err := g.devs[0].CopyRate(64<<20, 10)
	if err != nil {
		return "", err
	}
	var wall time.Duration
	for _, ts := range runs {
		for _, t := range ts {
			wall += t
		}
	}
	now := g.counts()
	got := float64(now.bytes-before.bytes) / wall.Seconds()
	busy := (now.busy - before.busy).Seconds() / wall.Seconds() / float64(len(g.devs))
	return fmt.Sprintf("gpu, %s: the actor pipelines sent %.2f GB/s, %.2f of a plain pinned copy (%.2f GB/s); streams busy %.1f%%",
		cell, got/1e9, got/rate, rate/1e9, 100*busy), nil
}
