package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/pause"
	"github.com/actorfeed/actorfeed/program"
)

// errHang marks a run that did not end within its deadline.
var errHang = errors.New("sim: hang")

// runOnce runs the program once in mode, with seed's faults in runFaults,
// and checks it against ref (nil: no exactly-once check).
func (w WhatIf) runOnce(ctx context.Context, pl plan, seed uint64, mode runMode, ref *Ledger) (RunReport, *Ledger) {
	rep := RunReport{Seed: seed, Faults: mode == runFaults}
	leaks := NewLeakCheck()
	sched := &Schedule{}
	if mode == runFaults && w.Schedule != nil {
		sched = w.Schedule
	}
	in, err := NewInjector(sched, InjectorOptions{Seed: seed, TimeScale: w.TimeScale})
	if err != nil {
		rep.Err = err
		return rep, nil
	}
	step := time.Duration(float64(pl.feed.Step) * w.TimeScale)
	if mode == runReference {
		step = 0
	}
	opts := w.Options
	opts.System = actors.NewSystem()
	opts.ReadTimeout = w.readTimeout()
	opts = in.Options(opts)
	scope := program.NewScope(opts)
	scope.Maps = w.Maps
	l := &Ledger{}
	m := newMeter(pl.feed.N, w.TimeScale)
	devStep := m.outer(l.Step(in.Step(m.inner(step))))
	err = w.drive(ctx, scope, pl, in, m, devStep, &rep)
	rep.Err = err
	rep.Stopped = ctx.Err() != nil
	if cerr := scope.Close(); cerr != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("close: %v", cerr))
	}
	if lerr := leaks.Check(opts.System); lerr != nil {
		rep.Violations = append(rep.Violations, lerr.Error())
	}
	if errors.Is(err, errHang) {
		rep.Violations = append(rep.Violations, err.Error())
	}
	m.report(&rep, in)
	if ref != nil {
		d := l.diff(ref)
		rep.Missing = d.lost()
		tol := pl.tolerance(rep.Skipped)
		if err != nil {
			tol.Missing = 1 << 62 // a run that ended early may miss anything, but never repeat one
		}
		rep.Violations = append(rep.Violations, d.violations(tol)...)
	}
	if rep.Elapsed > 0 {
		rep.Throughput = float64(rep.Samples) / rep.Elapsed.Seconds()
	}
	return rep, l
}

// drive starts the pipeline, runs its passes under the deadline and
// samples it, filling in what only the pipeline knows.
func (w WhatIf) drive(ctx context.Context, scope *program.Scope, pl plan, in *Injector, m *meter, step actors.StepFunc, rep *RunReport) error {
	if err := scope.Run(ctx, &w.Spec.Startup); err != nil {
		return err
	}
	deadline := time.Duration(float64(w.Deadline) * w.TimeScale)
	rctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	in.Start(start)
	m.begin(start)
	p, err := scope.RunDevices(rctx, pl.feed.Reader, actors.Devices{N: pl.feed.N, Step: step})
	if err != nil {
		return err
	}
	stop := m.sample(time.Duration(float64(w.SampleEvery) * w.TimeScale))
	defer stop()
	rep.Bound = pl.bound(scope.Options)
	for pass := range pl.feed.Passes {
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return err
			}
		}
		m.newPass()
		if err := p.Run(rctx); err != nil {
			if rctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w: pass %d did not end within %v: %w", errHang, pass, w.Deadline, err)
			}
			return err
		}
		st := p.Stats()
		rep.Skipped += st.Skipped
		rep.PeakLiveBatches = max(rep.PeakLiveBatches, st.PeakLiveBatches)
		if rep.Bound > 0 && st.PeakLiveBatches > rep.Bound {
			rep.Violations = append(rep.Violations, fmt.Sprintf("pass %d: %d batches alive at once, the bound is %d", pass, st.PeakLiveBatches, rep.Bound))
		}
	}
	m.end()
	st := p.Stats()
	rep.Restarts = st.Restarts
	for _, d := range st.Devices {
		rep.Batches += d.Batches
	}
	return nil
}

// meter measures the devices: each step's wait for data, its busy time
// (the step and any slowdown, not a stall), and samples over time.
type meter struct {
	scale float64

	mu      sync.Mutex
	start   time.Time
	stop    time.Time
	idle    []time.Time // when each device's last step ended
	began   []time.Time // when each device's current step began its work
	waits   [][]time.Duration
	busy    []time.Duration
	samples int
	first   time.Time // the first batch's arrival
	series  []Point
}

// maxPoints bounds a run's time series (about 3 hours at the default
// interval); sampling stops there.
const maxPoints = 100_000

func newMeter(devices int, scale float64) *meter {
	return &meter{scale: scale, idle: make([]time.Time, devices), began: make([]time.Time, devices),
		waits: make([][]time.Duration, devices), busy: make([]time.Duration, devices)}
}

func (m *meter) begin(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = t
}

// newPass starts every device's wait afresh: the wait for a pass's first
// batch counts from the pass's start.
func (m *meter) newPass() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for d := range m.idle {
		m.idle[d] = now
	}
}

func (m *meter) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stop = time.Now()
}

// outer measures a step from the batch's arrival to its end.
func (m *meter) outer(step actors.StepFunc) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) error {
		d := actors.DeviceFrom(ctx)
		now := time.Now()
		m.mu.Lock()
		m.waits[d] = append(m.waits[d], now.Sub(m.idle[d]))
		m.began[d] = now
		if m.first.IsZero() {
			m.first = now
		}
		m.mu.Unlock()
		err := step(ctx, it)
		end := time.Now()
		m.mu.Lock()
		m.busy[d] += end.Sub(m.began[d])
		m.idle[d] = end
		if err == nil {
			m.samples += len(it.IDs) - it.Padding
		}
		m.mu.Unlock()
		return err
	}
}

// inner is the simulated step: it marks when the device's work began
// (after any stall) and takes step.
func (m *meter) inner(step time.Duration) actors.StepFunc {
	return func(ctx context.Context, _ actors.Item) error {
		d := actors.DeviceFrom(ctx)
		m.mu.Lock()
		m.began[d] = time.Now()
		m.mu.Unlock()
		return pause.Sleep(ctx, step)
	}
}

// sample records a Point every interval until the returned func is called.
func (m *meter) sample(every time.Duration) func() {
	done := make(chan struct{})
	m.take(m.start) // the first point and the last bound every run's series, however short
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(every, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.take(now)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		m.take(time.Now())
	}
}

// take records a point of the series at now.
func (m *meter) take(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.series) >= maxPoints {
		return
	}
	pt := Point{At: m.unscale(now.Sub(m.start)), Samples: m.samples, Busy: make([]time.Duration, len(m.busy))}
	for d, b := range m.busy {
		if !m.began[d].IsZero() && m.idle[d].Before(m.began[d]) {
			b += now.Sub(m.began[d]) // a step under way
		}
		pt.Busy[d] = m.unscale(b)
	}
	m.series = append(m.series, pt)
}

func (m *meter) unscale(d time.Duration) time.Duration { return time.Duration(float64(d) / m.scale) }

// report fills in the meter's figures, in the schedule's time.
func (m *meter) report(rep *RunReport, in *Injector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	end := m.stop
	if end.IsZero() {
		end = time.Now()
	}
	rep.Elapsed = m.unscale(end.Sub(m.start))
	if !m.first.IsZero() {
		rep.FirstBatch = m.unscale(m.first.Sub(m.start))
	}
	rep.Injected = in.Injected()
	rep.Windows = in.Windows()
	rep.Series = m.series
	rep.Samples = m.samples
	for d := range m.busy {
		waits := make([]time.Duration, len(m.waits[d]))
		for i, x := range m.waits[d] {
			waits[i] = m.unscale(x)
		}
		dr := DeviceReport{Device: d, Batches: len(waits), WaitP50: quantile(waits, 0.50), WaitP95: quantile(waits, 0.95), WaitP99: quantile(waits, 0.99), WaitMax: quantile(waits, 1)}
		if rep.Elapsed > 0 {
			dr.Busy = m.unscale(m.busy[d]).Seconds() / rep.Elapsed.Seconds()
		}
		rep.Devices = append(rep.Devices, dr)
	}
}
