package benchmark

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/tensor"
)

// Config is the pipeline measured.
type Config struct {
	Path string
	// Paths, when set, are the files instead of Path.
	Paths  []string
	Window int // shuffle window
	Batch  int
	Buffer int // double buffer window, in batches (default 2)
	// System is the actor system the pipelines are spawned in, shared by
	// the runs as a trainer shares one; nil makes one per pipeline.
	System *actor.ActorSystem
	// AnyOrder reads without the order (Files.AnyOrder).
	AnyOrder bool
	// Devices is how many devices the pipeline feeds (default 1); their
	// steps run at once.
	Devices int
	// Lanes is Options.Lanes.
	Lanes int
	// Step, when set, is Pass's devices' step instead of its step
	// argument (a real device's, which needs the device's index), and
	// Storage where their batches are made.
	Step    actors.StepFunc
	Storage actors.Storage
	// Service, when set, runs the stages before the double buffer on its
	// workers (System must then be a node's).
	Service *actors.Service
	// Map, when set, runs after the batch stage.
	Map *actors.Map
}

func (c Config) pipeline(dev actors.Devices) (*actors.Pipeline, error) {
	paths := c.Paths
	if len(paths) == 0 {
		paths = []string{c.Path}
	}
	chain := []actors.Stage{actors.Files{Paths: paths, AnyOrder: c.AnyOrder}, actors.Shuffle{Window: c.Window, Seed: 1}, actors.Batch{Size: c.Batch}}
	if c.Map != nil {
		chain = append(chain, *c.Map)
	}
	return actors.NewDevices(append(chain, actors.DoubleBuffer{Window: c.Buffer}), dev, actors.Options{System: c.System, Lanes: c.Lanes, Service: c.Service})
}

// Pass builds the pipeline, runs one pass with step as the device's work,
// and returns how long that took and how long until the first batch
// reached the device. recycle is Devices.Recycle.
func (c Config) Pass(ctx context.Context, recycle bool, step func(tensor.Slots)) (total, first time.Duration, err error) {
	start := time.Now()
	var firstAt time.Time
	var once sync.Once // the devices step at once
	p, err := c.pipeline(actors.Devices{N: max(c.Devices, 1), Recycle: recycle, Storage: c.Storage, Step: func(ctx context.Context, it actors.Item) error {
		once.Do(func() { firstAt = time.Now() })
		if c.Step != nil {
			return c.Step(ctx, it)
		}
		step(it.Slots)
		return nil
	}})
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	if err := p.Run(ctx); err != nil {
		return 0, 0, err
	}
	return time.Since(start), firstAt.Sub(start), nil
}

// Running is one pipeline kept across passes, as a trainer keeps one: its
// passes after the first are the pipeline's steady state, without the cost
// of spawning it and filling its windows for the first batch.
type Running struct {
	p      *actors.Pipeline
	passes int
}

// Start builds the pipeline with step as the devices' work (called from
// c.Devices goroutines at once); recycle is Devices.Recycle. Close it when
// done.
func (c Config) Start(recycle bool, step func(tensor.Slots)) (*Running, error) {
	p, err := c.pipeline(actors.Devices{N: max(c.Devices, 1), Recycle: recycle, Step: func(_ context.Context, it actors.Item) error {
		step(it.Slots)
		return nil
	}})
	if err != nil {
		return nil, err
	}
	return &Running{p: p}, nil
}

// Pass runs the next pass (after a Reset, from the second on) and returns
// how long it took, the Reset included. The first pass starts at Start, so
// its time is only the part left when Pass is called: measure from the
// second pass on.
func (r *Running) Pass(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if r.passes > 0 {
		if err := r.p.Reset(); err != nil {
			return 0, err
		}
	}
	r.passes++
	if err := r.p.Run(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Close stops the pipeline.
func (r *Running) Close() error { return r.p.Close() }

// Device is what a device sees when its step takes twice the pipeline's
// time per batch.
type Device struct {
	PerBatch  time.Duration // the pipeline's time per batch with a free device (median)
	StepAsked time.Duration // 2 * PerBatch
	StepTaken time.Duration // the mean step: a timer may wake late
	Busy      float64       // fraction of the warm passes' span spent in steps
	// Boundary is the longest wait before the first batch of a warm pass;
	// Waits are the waits before every step of the warm passes.
	Boundary time.Duration
	Waits    []time.Duration
}

// Warm passes: the double buffer reads a pass ahead from the second pass
// on, so passes from the third on start warm.
const (
	devicePasses = 6
	firstWarm    = 2
)

// WarmPasses names the passes Device's figures cover, from 1.
func WarmPasses() (from, to int) { return firstWarm + 1, devicePasses }

// Device measures the pipeline's time per batch over repeat passes with a
// free device, then runs devicePasses passes on one pipeline whose device
// waits (without using the CPU, as a host thread waiting for its
// accelerator does) twice that long per batch. The batch must be large
// enough for the step to be a few milliseconds: a timer can wake up to a
// millisecond late.
func (c Config) Device(ctx context.Context, repeat int) (Device, error) {
	var d Device
	pers := make([]time.Duration, 0, repeat)
	for range max(repeat, 1) {
		stepped := 0
		el, _, err := c.Pass(ctx, false, func(tensor.Slots) { stepped++ })
		if err != nil {
			return d, err
		}
		pers = append(pers, el/time.Duration(max(stepped, 1)))
	}
	d.PerBatch = Median(pers)
	d.StepAsked = 2 * d.PerBatch
	var last time.Time
	p, err := c.pipeline(actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error {
		now := time.Now()
		if !last.IsZero() && it.Pass >= firstWarm {
			w := now.Sub(last)
			d.Waits = append(d.Waits, w)
			if it.Seq == 0 {
				d.Boundary = max(d.Boundary, w)
			}
		}
		t := time.NewTimer(d.StepAsked)
		<-t.C
		last = time.Now()
		return nil
	}})
	if err != nil {
		return d, err
	}
	defer p.Close()
	var warmFrom time.Time
	var before actors.DeviceStats
	for pass := range devicePasses {
		if pass == firstWarm {
			warmFrom, before = time.Now(), p.Stats().Devices[0]
		}
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return d, err
			}
		}
		if err := p.Run(ctx); err != nil {
			return d, err
		}
	}
	span, after := time.Since(warmFrom), p.Stats().Devices[0]
	busy, stepped := after.Busy-before.Busy, after.Batches-before.Batches
	d.StepTaken = busy / time.Duration(max(stepped, 1))
	d.Busy = busy.Seconds() / span.Seconds()
	return d, nil
}

// Memory is what passes cost in allocations and heap.
type Memory struct {
	AllocsPerBatch float64  // from the second pass on
	Heap           []uint64 // in use after a collection, after each pass
	PeakLive       int      // Stats.PeakLiveBatches
}

// Memory runs passes passes on one pipeline whose device calls step.
func (c Config) Memory(ctx context.Context, passes int, step func(tensor.Slots)) (Memory, error) {
	var m Memory
	p, err := c.pipeline(actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error { step(it.Slots); return nil }})
	if err != nil {
		return m, err
	}
	defer p.Close()
	var ms runtime.MemStats
	var mallocs uint64
	batches := 0
	for pass := range passes {
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return m, err
			}
		}
		runtime.ReadMemStats(&ms)
		before, b0 := ms.Mallocs, p.Stats().Devices[0].Batches
		if err := p.Run(ctx); err != nil {
			return m, err
		}
		runtime.ReadMemStats(&ms)
		if pass > 0 {
			mallocs += ms.Mallocs - before
			batches += p.Stats().Devices[0].Batches - b0
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		m.Heap = append(m.Heap, ms.HeapInuse)
	}
	m.AllocsPerBatch = float64(mallocs) / float64(max(batches, 1))
	m.PeakLive = p.Stats().PeakLiveBatches
	return m, nil
}

// Median is the median of xs (the upper one of an even count).
func Median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Mean is the mean of xs (0 when empty).
func Mean(xs []time.Duration) time.Duration {
	var total time.Duration
	for _, x := range xs {
		total += x
	}
	return total / time.Duration(max(len(xs), 1))
}

// TakeTurns runs each of n measurements repeat times: measure(r) runs
// measurement r, which takes its turn at going first, and each starts from
// a collected heap, so that none pays for the garbage of the one before
// it. It stops at the first error.
func TakeTurns(repeat, n int, measure func(r int) error) error {
	for i := range repeat {
		for k := range n {
			runtime.GC()
			if err := measure((i + k) % n); err != nil {
				return err
			}
		}
	}
	return nil
}
