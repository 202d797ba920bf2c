package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/sim/internal/bound"
)

// ErrWhatIf is wrapped by the errors of WhatIf.Run that come before any
// run: a program sim cannot run, or a schedule that targets what the
// program does not have.
var ErrWhatIf = errors.New("sim: what-if")

// WhatIf runs a user's own program (docs/programs.md) on its own files
// under a fault schedule, Runs times with seeds Seed, Seed+1, ..., and
// measures what the faults do to its devices (docs/simulation.md).
type WhatIf struct {
	// Spec is the program, its relative paths resolved
	// (program.Spec.ResolvePaths). Its devices section (or main program)
	// says which reader feeds how many devices, each step's simulated
	// time, and the passes.
	Spec *program.Spec
	// Schedule is the fault schedule; nil runs without faults.
	Schedule *Schedule
	Seed     uint64
	Runs     int
	// Baseline also runs the program once without faults, first; its
	// figures are the ratios' denominators and its ledger the reference of
	// the exactly-once check. Without it a reference run without faults
	// and without step time gives the ledger.
	Baseline bool
	// TimeScale multiplies every duration of the run (the devices' step,
	// the schedule's latencies, stalls and windows, the read timeout) and
	// divides every figure's time by it; 0 is 1 (InjectorOptions).
	TimeScale float64
	// Deadline bounds each run, in the schedule's time (default 10 min):
	// a run that does not end by it is a hang.
	Deadline time.Duration
	// SampleEvery is the interval of the runs' time series, in the
	// schedule's time (default 100 ms).
	SampleEvery time.Duration
	// Options are the pipelines' options (OnCorrupt, Retry, ...); System,
	// Open and Faults are set per run.
	Options actors.Options
	// Maps are the maps the program's create_map_reader ops name.
	Maps map[string]actors.MapFunc
	// OnRun, when set, is called with each run's report as it ends.
	OnRun func(RunReport)
}

// WhatIfResult is what WhatIf.Run measured.
type WhatIfResult struct {
	Runs     []RunReport
	Baseline *RunReport // nil without WhatIf.Baseline
	Median   Summary    // of Runs
	// Ratios are Median over the baseline's figures, nil without one.
	Ratios *Ratios
}

// plan is what a what-if runs: the reader, its devices and its stages.
type plan struct {
	feed   program.DeviceSpec
	stages []actors.Stage
	paths  []string
}

// Run runs the baseline (or the reference) and then every run. Errors
// before the first run wrap ErrWhatIf or ErrBadSchedule; a run that fails
// is a report with Err set, not an error, and so is one that breaks an
// invariant (Violations).
func (w WhatIf) Run(ctx context.Context) (*WhatIfResult, error) {
	w.defaults()
	pl, err := w.plan(ctx)
	if err != nil {
		return nil, err
	}
	if w.Schedule != nil {
		if _, err := NewInjector(w.Schedule, InjectorOptions{TimeScale: w.TimeScale}); err != nil {
			return nil, err
		}
	}
	res := &WhatIfResult{}
	mode := runReference
	if w.Baseline {
		mode = runBaseline
	}
	base, ref := w.runOnce(ctx, pl, w.Seed, mode, nil)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if base.Err != nil || len(base.Violations) > 0 {
		// Nothing can be compared with a reference that fails.
		return nil, fmt.Errorf("%w: the program's run without faults failed: %v %v", ErrWhatIf, base.Err, base.Violations)
	}
	if w.Baseline {
		res.Baseline = &base
	}
	for k := range w.Runs {
		r, _ := w.runOnce(ctx, pl, w.Seed+uint64(k), runFaults, ref)
		res.Runs = append(res.Runs, r)
		if w.OnRun != nil {
			w.OnRun(r)
		}
		if ctx.Err() != nil {
			break
		}
	}
	res.Median = Summarize(res.Runs)
	if base := Summarize([]RunReport{*cmp.Or(res.Baseline, &RunReport{})}); res.Baseline != nil && base.Measured > 0 && res.Median.Measured > 0 {
		res.Ratios = ratios(res.Median, base)
	}
	return res, ctx.Err()
}

func (w *WhatIf) defaults() {
	if w.TimeScale == 0 {
		w.TimeScale = 1
	}
	if w.Deadline <= 0 {
		w.Deadline = 10 * time.Minute
	}
	if w.SampleEvery <= 0 {
		w.SampleEvery = 100 * time.Millisecond
	}
	if w.Runs < 1 {
		w.Runs = 1
	}
}

// plan runs the startup program once, in a scope that starts nothing, to
// learn the stages, and checks that the schedule's targets exist.
func (w WhatIf) plan(ctx context.Context) (plan, error) {
	if w.Spec == nil {
		return plan{}, fmt.Errorf("%w: no program", ErrWhatIf)
	}
	pl := plan{feed: w.Spec.Feed()}
	scope := program.NewScope(actors.Options{})
	defer scope.Close()
	scope.Maps = w.Maps
	if err := scope.Run(ctx, &w.Spec.Startup); err != nil {
		return plan{}, fmt.Errorf("%w: the startup program: %w", ErrWhatIf, err)
	}
	r := scope.Reader(pl.feed.Reader)
	if r == nil {
		return plan{}, fmt.Errorf("%w: the program has no reader %q", ErrWhatIf, pl.feed.Reader)
	}
	pl.stages = r.Stages()
	files, ok := pl.stages[0].(actors.Files)
	if !ok {
		return plan{}, fmt.Errorf("%w: reader %q does not read files: simulate programs whose reader starts with open_files or create_recordio_file_reader", ErrWhatIf, pl.feed.Reader)
	}
	pl.paths = files.Paths
	if w.Schedule != nil {
		if err := pl.bind(w.Schedule, w.Options.Lanes); err != nil {
			return plan{}, err
		}
	}
	return pl, nil
}

// bind checks that every fault targets something the program has, run in
// lanes lanes.
func (pl plan) bind(s *Schedule, lanes int) error {
	kinds := []string{actors.KindFileReader, actors.KindFiles, actors.KindDevice}
	if lanes > 1 { // lanes add deal and merge stages, and a double buffer if there is none
		kinds = append(kinds, actors.KindDeal, actors.KindMerge, actors.KindDoubleBuffer)
	}
	for _, st := range pl.stages {
		switch st.(type) {
		case actors.Shuffle:
			kinds = append(kinds, actors.KindShuffle)
		case actors.Batch:
			kinds = append(kinds, actors.KindBatch)
		case actors.MultiPass:
			kinds = append(kinds, actors.KindMultiPass)
		case actors.DoubleBuffer:
			kinds = append(kinds, actors.KindDoubleBuffer)
		}
	}
	for i, f := range s.Faults {
		bad := &ScheduleError{Line: f.Line, Fault: i + 1, Kind: f.Kind}
		switch {
		case fileFault(f.Kind) && f.Files != "" && !slices.ContainsFunc(pl.paths, func(e string) bool { return f.matchesFile(entryPath(e)) }):
			bad.Msg = fmt.Sprintf("files: %q matches none of the program's %d files", f.Files, len(pl.paths))
		case f.Kind == StagePanic && !slices.Contains(kinds, f.Stage):
			bad.Msg = fmt.Sprintf("stage: the program has no %s stage (it has %v)", f.Stage, kinds)
		case slices.ContainsFunc(f.Devices, func(d int) bool { return d >= pl.feed.N }):
			bad.Msg = fmt.Sprintf("devices: the program feeds %d device(s), numbered from 0; got %v", pl.feed.N, f.Devices)
		default:
			continue
		}
		return bad
	}
	return nil
}

// entryPath is a file entry's path, without a format: prefix.
func entryPath(entry string) string {
	if _, path, err := readers.ParseEntry(entry); err == nil {
		return path
	}
	return entry
}

// runMode says which kind of run runOnce makes.
type runMode int

const (
	runFaults    runMode = iota // with the schedule
	runBaseline                 // without faults, with the step time
	runReference                // without faults and without step time: the exactly-once reference, fast
)

// tolerance is what the exactly-once check lets pass in a program of these
// stages: skipped records, and the tails that timing decides.
func (pl plan) tolerance(skipped uint64) Tolerance {
	tol := Tolerance{Missing: int(skipped)}
	anyOrder := pl.stages[0].(actors.Files).AnyOrder
	batch := 1
	for _, st := range pl.stages {
		switch st := st.(type) {
		case actors.Batch:
			batch = st.Size
			if st.DropLast && anyOrder {
				tol.Tail += st.Size
			}
		case actors.DoubleBuffer: // after the batch stage
			if st.DropPartial {
				tol.Tail += (pl.feed.N - 1) * batch
			}
		}
	}
	return tol
}

// bound is the most batches the program's pipeline may hold alive at once
// (docs/memory.md), or 0 when it has no batch stage.
func (pl plan) bound(o actors.Options) int {
	o.EnsureDefaults()
	batch, prefetch, multi := 0, 2, false
	for _, st := range pl.stages {
		switch st := st.(type) {
		case actors.Batch:
			batch = st.Size
		case actors.MultiPass:
			multi = true
		case actors.DoubleBuffer:
			prefetch = cmp.Or(st.Window, 2) // DoubleBuffer's default
		}
	}
	if batch == 0 {
		return 0
	}
	return bound.Links(o, o.GroupSize, batch, multi, pl.feed.N, prefetch) + bound.Lanes(o, o.GroupSize, batch)
}

// readTimeout scales the pipeline's read timeout with the schedule, so
// that a scaled stall is abandoned exactly when the unscaled one would be.
func (w WhatIf) readTimeout() time.Duration {
	o := w.Options
	o.EnsureDefaults()
	if o.ReadTimeout < 0 {
		return o.ReadTimeout
	}
	return time.Duration(float64(o.ReadTimeout) * w.TimeScale)
}
