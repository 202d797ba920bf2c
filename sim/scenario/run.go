package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/pause"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/bound"
	"github.com/actorfeed/actorfeed/sim/internal/records"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// The runtime settings scenarios run under, Options' defaults.
const (
	// DefaultReadTimeout abandons a stalled read: far above the slowest
	// legitimate call under injected latency (a reopen reads every chunk
	// header).
	DefaultReadTimeout = 300 * time.Millisecond
)

// DefaultIntensity allows the restarts of any mix of single faults; a storm
// goes past it.
func DefaultIntensity() supervisor.Intensity {
	return supervisor.Intensity{MaxRestarts: 20, Within: 10 * time.Second}
}

// DefaultRetry retries transient errors quickly.
func DefaultRetry() supervisor.Backoff {
	return supervisor.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 8}
}

// stormLength is how many messages in a row a panic storm breaks: more
// than DefaultIntensity allows.
const stormLength = 25

// Options tune Run.
type Options struct {
	// Deadline bounds one run of a scenario (default 20 s).
	Deadline time.Duration
	// Dir holds the scenario's files (default a temporary directory, removed
	// afterwards).
	Dir string
	// NoLeakCheck skips the goroutine check (for callers that run other
	// goroutines at the same time, such as parallel tests).
	NoLeakCheck bool
	// Intensity bounds the pipeline's restarts (default DefaultIntensity).
	// The storms that scenarios draw are longer than the default allows.
	Intensity supervisor.Intensity
	// Retry is the schedule for transient I/O errors (default
	// DefaultRetry).
	Retry supervisor.Backoff
	// ReadTimeout abandons a stalled read (default DefaultReadTimeout).
	ReadTimeout time.Duration
}

// EnsureDefaults sets every zero field to its default, so that a caller
// can see the values scenarios run with.
func (o *Options) EnsureDefaults() {
	if o.Deadline <= 0 {
		o.Deadline = 20 * time.Second
	}
	if o.Intensity == (supervisor.Intensity{}) {
		o.Intensity = DefaultIntensity()
	}
	if o.Retry == (supervisor.Backoff{}) {
		o.Retry = DefaultRetry()
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
}

// Result is what Run found.
type Result struct {
	Scenario   Scenario
	Verdict    sim.Verdict
	Violations []string
	Err        error // the error the pipeline ended with, if any
	Restarts   int
	Skipped    uint64
	Fired      map[sim.FaultKind]int // faults that fired, by kind
	Samples    int                   // consumed in all passes
	Duration   time.Duration
}

// entry is one consumed batch.
type entry struct {
	device, seq int
	ids         []uint64
}

// ledger records what the devices consumed, per pass.
type ledger struct {
	mu     sync.Mutex
	passes map[int][]entry
}

func (l *ledger) add(pass, device, seq int, ids []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.passes == nil {
		l.passes = map[int][]entry{}
	}
	l.passes[pass] = append(l.passes[pass], entry{device: device, seq: seq, ids: slices.Clone(ids)})
}

// order is each device's ids in the order it consumed them, per pass.
func (l *ledger) order() map[int][][]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int][][]uint64{}
	for pass, es := range l.passes {
		byDevice := map[int][]entry{}
		for _, e := range es {
			byDevice[e.device] = append(byDevice[e.device], e)
		}
		devs := make([][]uint64, len(byDevice))
		for d := range len(byDevice) {
			for _, e := range byDevice[d] {
				devs[d] = append(devs[d], e.ids...)
			}
		}
		out[pass] = devs
	}
	return out
}

// Run runs a scenario and checks the invariants. It never panics and
// returns within the deadline plus a bounded shutdown.
func Run(ctx context.Context, sc Scenario, o Options) (res Result) {
	res = Result{Scenario: sc, Verdict: sim.Pass, Fired: map[sim.FaultKind]int{}}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	violate := violation(func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	})
	defer func() {
		if len(res.Violations) > 0 && res.Verdict != sim.Stopped {
			res.Verdict = sim.Fail
		}
	}()
	o.EnsureDefaults()
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "actorfeed-sim-"); err != nil {
			violate("setting up: %v", err)
			return res
		}
		defer os.RemoveAll(dir)
	}
	paths, damaged, cut, err := dataset(dir, sc)
	if err != nil {
		violate("setting up: %v", err)
		return res
	}
	var leaks goleak.Option
	if !o.NoLeakCheck {
		leaks = goleak.IgnoreCurrent()
	}
	if sc.Preempt != nil {
		runPreempted(ctx, sc, paths, damaged, o, leaks, &res, violate)
		return res
	}

	l, run := execute(ctx, sc, paths, o, true)
	res.Err, res.Restarts, res.Skipped, res.Fired, res.Samples = run.err, run.restarts, run.skipped, run.fired, run.samples
	if ctx.Err() != nil {
		// Interrupted by the caller, not by the scenario's own deadline: a
		// pass cut short is no hang, and nothing else can be judged.
		res.Verdict, res.Violations = sim.Stopped, nil
		return res
	}
	for _, v := range run.violations {
		violate("%s", v)
	}
	if !o.NoLeakCheck {
		if err := goleak.Find(leaks); err != nil {
			violate("goroutines left after shutdown: %v", err)
		}
	}

	exp := expectFrom(sc, damaged, cut)
	if sc.Shape.Queue {
		exp = expectQueue(sc.Shape, sc.Faults)
	}
	if sh := sc.Shape; sh.DropLast && !sh.AnyOrder && !sh.Queue && !exp.errorDue {
		if exp.tails, err = orderTails(sc, paths, damaged); err != nil {
			violate("computing the order: %v", err)
			return res
		}
	}
	switch {
	case run.err == nil && exp.errorDue:
		violate("the run succeeded, but its files are damaged and the policy says fail")
	case run.err == nil && exp.killed:
		violate("the run succeeded, but its producer killed the feed queue")
	case run.err != nil:
		checkError(violate, run.err, exp, paths, o.Deadline)
		checkNoneTwice(violate, l, exp.copies)
	default:
		checkDelivered(violate, sc.Shape, run, l, exp, o.Intensity)
	}
	if len(res.Violations) == 0 && run.err == nil && sc.Shape.ordered() {
		checkOrder(ctx, violate, sc, paths, o, l)
	}
	return res
}

// checkOrder checks that, in the order, a run consumed in the fault-free
// run's order.
func checkOrder(ctx context.Context, violate violation, sc Scenario, paths []string, o Options, l *ledger) {
	ref, refRun := execute(ctx, Scenario{Seed: sc.Seed, Shape: sc.Shape, Faults: staticOnly(sc.Faults)}, paths, o, false)
	if refRun.err != nil {
		violate("the fault-free reference run failed: %v", refRun.err)
	} else if a, b := l.order(), ref.order(); !equalOrders(a, b) {
		violate("consumed order differs from the fault-free run's")
	}
}

// violation records a broken invariant.
type violation func(format string, args ...any)

// expectation is what a scenario's run should deliver, from the damage its
// static faults did on disk.
type expectation struct {
	ids       []uint64 // every undamaged sample, once
	corrupted int      // damaged records
	copies    int      // times each sample is consumed in a pass (multi-pass)
	// tails, in the order with drop_last: per upstream pass, the undamaged
	// samples at the positions past the last whole batch.
	tails    []int
	errorDue bool // damage the policy fails on, or a truncation
	storm    bool // a panic storm, which may end in the intensity error
	// byPass, when set, is each pass's ids instead of ids (a feed queue
	// closed mid-pass delivers fewer).
	byPass [][]uint64
	killed bool // the producer kills the feed queue: its error is due
}

func expectFrom(sc Scenario, damaged, cut []map[int]bool) expectation {
	sh := sc.Shape
	e := expectation{copies: max(sh.MultiPass, 1)}
	anyDamage := false
	for f := range sh.Files {
		for r := range sh.Records {
			if damaged[f][r] {
				e.corrupted++
				anyDamage = true
				continue
			}
			if cut[f][r] { // the file's damaged tail: lost, not skipped
				continue
			}
			e.ids = append(e.ids, messages.SampleID(f, r))
		}
		anyDamage = anyDamage || cut[f] != nil
	}
	e.errorDue = anyDamage && !sh.Skip
	for _, f := range sc.Faults {
		e.storm = e.storm || f.Kind == sim.PanicStorm
	}
	return e
}

// checkError checks the error a run ended with: a *actors.StageError, due,
// naming what it must, and never a hang.
func checkError(violate violation, err error, exp expectation, paths []string, deadline time.Duration) {
	var se *actors.StageError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errHang):
		violate("no result within %v: %v", deadline, err)
	case !errors.As(err, &se):
		violate("the error is not a *actors.StageError: %v", err)
	case errors.Is(err, supervisor.ErrRestartIntensity):
		if !exp.storm {
			violate("restart intensity exceeded with no storm of faults: %v", err)
		}
		if se.Stage == "" {
			violate("the intensity error names no stage: %v", err)
		}
	case errors.Is(err, readers.ErrQueueKilled):
		if !exp.killed || !errors.Is(err, errProducer) {
			violate("a feed queue killed, but not by the producer's error: %v", err)
		}
	case errors.Is(err, format.ErrCorrupt):
		if !exp.errorDue {
			violate("a corruption error, but no file was damaged (or the policy skips): %v", err)
		}
		if !slices.Contains(paths, se.File) {
			violate("the corruption error names no file of the scenario: %v", err)
		}
	default:
		violate("unexpected error: %v", err)
	}
}

// checkNoneTwice checks that even a failed run never handed a sample out
// more than copies times in a pass.
func checkNoneTwice(violate violation, l *ledger, copies int) {
	for pass, es := range l.passes {
		seen := map[uint64]int{}
		for _, e := range es {
			for _, id := range e.ids {
				if seen[id]++; seen[id] > copies {
					f, r := messages.SplitID(id)
					violate("pass %d: sample %d#%d consumed %d times", pass, f, r, seen[id])
				}
			}
		}
	}
}

// checkDelivered checks a run that succeeded: every pass delivered each
// expected sample exactly once (copies times behind a multi-pass reader),
// less exactly what drop_last and a dropped partial step leave out, and the
// skip policy counted exactly the damaged records.
func checkDelivered(violate violation, sh Shape, run outcome, l *ledger, exp expectation, intensity supervisor.Intensity) {
	if run.restarts > intensity.MaxRestarts {
		violate("%d restarts, more than the intensity allows, and no error", run.restarts)
	}
	for pass := range sh.Passes {
		var got []uint64
		for _, e := range l.passes[pass] {
			got = append(got, e.ids...)
		}
		var want []uint64
		for range exp.copies {
			want = append(want, exp.ids...)
		}
		if exp.byPass != nil {
			want = exp.byPass[pass]
		}
		exact, allow := 0, 0
		switch {
		case sh.DropLast && exp.tails != nil: // batches cover positions of the order
			for k := range exp.copies {
				exact += exp.tails[pass*exp.copies+k]
			}
		case sh.DropLast:
			exact = len(want) / exp.copies % sh.Batch * exp.copies
		}
		if sh.DropPartial {
			allow = (sh.Devices - 1) * sh.Batch
		}
		if msg := sameSet(want, got, exact, allow); msg != "" {
			violate("pass %d: %s", pass, msg)
		}
	}
	if sh.Skip && run.skipped != uint64(exp.corrupted*exp.copies) {
		violate("skipped %d records in the last pass, %d are damaged", run.skipped, exp.corrupted*exp.copies)
	}
}

// sameSet compares two multisets of ids: got must hold each id of want
// once, except that exactly exact of them, and up to allow more, may be
// missing.
func sameSet(want, got []uint64, exact, allow int) string {
	w, g := slices.Clone(want), slices.Clone(got)
	slices.Sort(w)
	slices.Sort(g)
	if exact == 0 && slices.Equal(w, g) {
		return ""
	}
	count := map[uint64]int{}
	for _, id := range w {
		count[id]++
	}
	for _, id := range g {
		count[id]--
	}
	var missing, extra []string
	lost := 0
	for id, c := range count {
		f, r := messages.SplitID(id)
		switch {
		case c > 0:
			missing = append(missing, fmt.Sprintf("%d#%d", f, r))
			lost += c
		case c < 0:
			extra = append(extra, fmt.Sprintf("%d#%d x%d", f, r, -c))
		}
	}
	if len(extra) == 0 && lost >= exact && lost <= exact+allow {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Sprintf("%d samples consumed, %d expected; missing %v, duplicated or unexpected %v", len(g), len(w), head(missing), head(extra))
}

func head(xs []string) []string {
	if len(xs) > 5 {
		return append(xs[:5:5], fmt.Sprintf("... %d more", len(xs)-5))
	}
	return xs
}

func equalOrders(a, b map[int][][]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for pass, devs := range a {
		other := b[pass]
		if len(devs) != len(other) {
			return false
		}
		for d := range devs {
			if !slices.Equal(devs[d], other[d]) {
				return false
			}
		}
	}
	return true
}

// staticOnly keeps the on-disk faults: the reference run reads the same
// damaged files, without the faults that happen while running.
func staticOnly(faults []Fault) []Fault {
	var out []Fault
	for _, f := range faults {
		if f.Kind == sim.FlipChunk || f.Kind == sim.Truncate {
			out = append(out, f)
		}
	}
	return out
}

var errHang = errors.New("sim: hang")

// outcome is what one execution of a scenario gave.
type outcome struct {
	err        error
	restarts   int
	skipped    uint64
	samples    int
	fired      map[sim.FaultKind]int
	violations []string
}

// execute builds the scenario's pipeline over paths (the static faults are
// already on disk), injects its running faults when live is set, runs its
// passes and shuts it down, checking what can only be seen while it runs.
func execute(ctx context.Context, sc Scenario, paths []string, o Options, live bool) (*ledger, outcome) {
	var out outcome
	sh := sc.Shape
	faults := sc.Faults
	if !live {
		faults = nil
	}
	d := newDisk(entries(sh, paths), faults, sc.Seed)
	panics := scheduledPanics(faults)
	sys := actors.NewSystem()
	opts := pipelineOptions(sh, o, sys, d, panics)
	l := &ledger{}
	dev := newDevices(sc, faults)
	stages := chain(sc, paths)
	begin := func(context.Context, int) {}
	if sh.Queue {
		feed, err := newFeeder(sh)
		if err != nil {
			out.violations = append(out.violations, fmt.Sprintf("setting up: %v", err))
			return l, out
		}
		stages[0], begin = feed.stage(), feed.begin
		defer feed.wait()
	}
	devs := actors.Devices{N: sh.Devices, Step: dev.step(l), Recycle: sh.Recycle}
	if sh.Storage {
		dev.storage = newStorage()
		devs.Storage = dev.storage
	}
	p, err := actors.NewDevices(stages, devs, opts)
	if err != nil {
		// In the order, building reads every file's index: damage there
		// (a truncation) is the run's error, a *StageError naming the file.
		out.err = err
		if se := (*actors.StageError)(nil); !errors.As(err, &se) {
			out.violations = append(out.violations, fmt.Sprintf("building the pipeline: %v", err))
		}
		if left := registered.Actors(sys); len(left) > 0 {
			out.violations = append(out.violations, fmt.Sprintf("actors left in the registry after a failed build: %v", left))
		}
		return l, out
	}
	limit := liveBound(sh, opts)
	rctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	out.err = runPasses(rctx, p, sh.Passes, limit, begin, &out.violations)
	st := p.Stats()
	out.restarts, out.skipped = st.Restarts, st.Skipped
	for _, dv := range st.Devices {
		out.samples += dv.Instances
	}
	closed := time.Now()
	if err := p.Close(); err != nil {
		out.violations = append(out.violations, fmt.Sprintf("close: %v", err))
	}
	if el := time.Since(closed); el > time.Second {
		out.violations = append(out.violations, fmt.Sprintf("close took %v, more than 1 s", el))
	}
	if left := registered.Actors(sys); len(left) > 0 {
		out.violations = append(out.violations, fmt.Sprintf("actors left in the registry: %v", left))
	}
	out.violations = append(out.violations, dev.violations()...)
	if dev.storage != nil {
		out.violations = append(out.violations, dev.storage.violations()...)
	}
	out.fired = d.counts()
	for k, v := range dev.fired() {
		out.fired[k] += v
	}
	for k, v := range panics.fired() {
		out.fired[k] += v
	}
	return l, out
}

// scheduledPanics are the stage panics that faults schedule: one for a
// StagePanic, Count in a row for a PanicStorm.
func scheduledPanics(scheduled []Fault) *stagePanics {
	panics := &stagePanics{}
	for _, f := range scheduled {
		switch f.Kind {
		case sim.StagePanic:
			panics.at = append(panics.at, panicAt{kind: f.Kind, PanicAt: faults.PanicAt{Kind: f.Stage, N: int64(f.N)}})
		case sim.PanicStorm:
			for k := range f.Count {
				panics.at = append(panics.at, panicAt{kind: f.Kind, PanicAt: faults.PanicAt{Kind: f.Stage, N: int64(f.N + k)}})
			}
		}
	}
	return panics
}

// runPasses runs passes passes of p, checking after each that no more than
// bound batches were alive at once; begin is called before each pass
// starts (a feed queue's producer). A pass that does not end by ctx's
// deadline is a hang.
func runPasses(ctx context.Context, p *actors.Pipeline, passes, bound int, begin func(context.Context, int), violations *[]string) error {
	for pass := range passes {
		begin(ctx, pass)
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return err
			}
		}
		if err := p.Run(ctx); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w: pass %d did not end: %w", errHang, pass, err)
			}
			return err
		}
		if peak := p.Stats().PeakLiveBatches; peak > bound {
			*violations = append(*violations, fmt.Sprintf("pass %d: %d batches alive at once, the bound is %d", pass, peak, bound))
		}
	}
	return nil
}

// pipelineOptions are the options a scenario's pipelines run with: the
// shape's links and policy, o's schedules, files opened through d, and the
// stage panics when there are some.
func pipelineOptions(sh Shape, o Options, sys *actor.ActorSystem, d *disk, panics *stagePanics) actors.Options {
	policy := supervisor.FailOnCorrupt
	if sh.Skip {
		policy = supervisor.SkipCorrupt
	}
	opts := actors.Options{System: sys, GroupSize: sh.Group, OnCorrupt: policy, Retry: o.Retry, Intensity: o.Intensity,
		ReadTimeout: o.ReadTimeout, Open: d.open, Window: sh.Window, Capacity: sh.Capacity, ReaderWindow: sh.ReaderWindow, Lanes: sh.Lanes}
	if len(panics.at) > 0 {
		opts.Faults = panics
	}
	return opts
}

// panicAt is a stage panic of a fault of kind kind.
type panicAt struct {
	faults.PanicAt
	kind sim.FaultKind
}

// stagePanics injects the scenario's stage panics and counts those that
// fired.
type stagePanics struct {
	at    []panicAt
	mu    sync.Mutex
	count map[sim.FaultKind]int
}

func (s *stagePanics) BeforeMessage(stage, kind string, n int64, msg any) {
	for _, p := range s.at {
		if n == p.N && p.Kind == kind {
			s.mu.Lock()
			if s.count == nil {
				s.count = map[sim.FaultKind]int{}
			}
			s.count[p.kind]++
			s.mu.Unlock()
			p.BeforeMessage(stage, kind, n, msg) // panics
		}
	}
}

func (s *stagePanics) fired() map[sim.FaultKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.count)
}

// chain is the scenario's stages.
func chain(sc Scenario, paths []string) []actors.Stage {
	sh := sc.Shape
	st := []actors.Stage{actors.Files{Paths: entries(sh, paths), Threads: sh.Threads, AnyOrder: sh.AnyOrder}}
	switch {
	case sh.Global:
		st = append(st, actors.Shuffle{Global: true, Seed: sc.Seed})
	case sh.Shuffle > 0:
		st = append(st, actors.Shuffle{Window: sh.Shuffle, Seed: sc.Seed})
	}
	if sh.XMap > 0 {
		st = append(st, actors.XMap{Fn: func(s tensor.Slots) (tensor.Slots, error) { return s, nil }, Workers: 2, Ordered: sh.XMap == 1})
	}
	st = append(st, actors.Batch{Size: sh.Batch, DropLast: sh.DropLast})
	if sh.MultiPass > 0 {
		st = append(st, actors.MultiPass{Passes: sh.MultiPass})
	}
	return append(st, actors.DoubleBuffer{Window: 2, DropPartial: sh.DropPartial})
}

// liveBound is the most batches that may be alive at once
// (docs/memory.md): the batch stage's unsent items and what its input
// can complete, a stage between it and the double buffer, the double
// buffer's windows (the consumers', and the next pass read ahead) and the
// devices'; with lanes, every lane's batch stage and the merge stage's
// queues.
func liveBound(sh Shape, o actors.Options) int {
	return bound.Links(o, sh.Group, sh.Batch, sh.MultiPass > 0, sh.Devices, 2) + bound.Lanes(o, sh.Group, sh.Batch)
}

// devices are the scenario's device steps: they check each batch, record it
// in the ledger, and inject the device faults.
type devices struct {
	sc      Scenario
	faults  []Fault
	storage *storage     // the devices' Storage, when the scenario has one
	blend   *order.Order // the scenario's blend, which names the record of each id; nil without one

	mu     sync.Mutex
	steps  []int
	rngs   []*rand.Rand
	done   map[int]bool
	count  map[sim.FaultKind]int
	errors []string
}

func newDevices(sc Scenario, faults []Fault) *devices {
	d := &devices{sc: sc, faults: faults, blend: sc.Shape.blendOrder(sc.Seed), steps: make([]int, sc.Shape.Devices),
		done: map[int]bool{}, count: map[sim.FaultKind]int{}}
	for k := range sc.Shape.Devices {
		d.rngs = append(d.rngs, rand.New(rand.NewPCG(sc.Seed, 1000+uint64(k))))
	}
	return d
}

func (d *devices) step(l *ledger) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) error {
		dev := actors.DeviceFrom(ctx)
		d.mu.Lock()
		d.steps[dev]++
		n := d.steps[dev]
		var delay time.Duration
		var crash bool
		for i, f := range d.faults {
			if f.Device != dev {
				continue
			}
			switch f.Kind {
			case sim.SlowDevice:
				delay += f.Delay + time.Duration(d.rngs[dev].Int64N(int64(f.Delay)+1))
			case sim.StallDevice:
				if n == f.N && !d.done[i] {
					d.done[i] = true
					d.count[f.Kind]++
					delay += f.Delay
				}
			case sim.PanicDevice:
				if n == f.N && !d.done[i] {
					d.done[i] = true
					d.count[f.Kind]++
					crash = true
				}
			}
		}
		if it.Seq%d.sc.Shape.Devices != dev {
			d.errors = append(d.errors, fmt.Sprintf("device %d stepped item %d of pass %d", dev, it.Seq, it.Pass))
		}
		if msg := aligned(it, d.sc.Shape.Format, d.blend); msg != "" {
			d.errors = append(d.errors, msg)
		}
		d.mu.Unlock()
		if d.storage != nil {
			d.storage.stepped(it.Slots)
		}
		if crash {
			panic(fmt.Sprintf("sim: device %d fails at step %d", dev, n))
		}
		if err := pause.Sleep(ctx, delay); err != nil {
			return err
		}
		l.add(it.Pass, dev, it.Seq, it.IDs)
		return nil
	}
}

// aligned checks that every instance's value is its id's: a record's
// first value, a token corpus sample's first token (records.Token). A
// blend's id names a file and the file's count of positions before it,
// and blend says which record of which of the file's epochs that reads.
func aligned(it actors.Item, format string, blend *order.Order) string {
	vals, err := tensor.View[int64](it.Slots[0].Tensor)
	if err != nil {
		return err.Error()
	}
	per, value := 1, records.Value
	if format == records.Megatron {
		per, value = records.SeqLen+1, records.Token
	}
	if len(vals) != per*len(it.IDs) {
		return fmt.Sprintf("%d values for %d ids", len(vals), len(it.IDs))
	}
	for i, id := range it.IDs {
		f, r := messages.SplitID(id)
		if blend != nil {
			record, _ := blend.BlendSource(f, uint64(r))
			r = int(record)
		}
		if vals[per*i] != value(f, r) {
			return fmt.Sprintf("instance %d holds %d, its id says %d#%d: data and ids came apart", i, vals[per*i], f, r)
		}
	}
	return ""
}

func (d *devices) violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errors)
}

func (d *devices) fired() map[sim.FaultKind]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.count)
}

// orderTails computes, from the order's definition (package order) over
// the files as written, how many undamaged samples each upstream pass's
// drop_last leaves out: in the order, a batch covers Batch positions, holes
// (damaged records) included, and the last, short one is dropped.
func orderTails(sc Scenario, paths []string, damaged []map[int]bool) ([]int, error) {
	sh := sc.Shape
	var splits []order.Split
	for f, path := range paths {
		if sh.Format != "" { // no chunks: runs of records (actors.DefaultSplitRecords)
			for at := 0; at < sh.Records; at += actors.DefaultSplitRecords {
				splits = append(splits, order.Split{File: f, First: uint64(at), Count: uint64(min(actors.DefaultSplitRecords, sh.Records-at))})
			}
			continue
		}
		x, err := index(path)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Chunks {
			if c.NumRecords > 0 {
				splits = append(splits, order.Split{File: f, First: uint64(c.FirstRecord), Count: uint64(c.NumRecords)})
			}
		}
	}
	ord, err := order.New(splits, order.Config{Seed: sc.Seed, Shuffle: sh.Shuffle > 0, Window: sh.Shuffle, Global: sh.Global, Files: len(paths)})
	if err != nil {
		return nil, err
	}
	n := ord.Len()
	var tails []int
	for epoch := range uint64(sh.epochs()) {
		ep, k := ord.Epoch(epoch), 0
		for g := n - n%uint64(sh.Batch); g < n; g++ {
			if f, r := ep.At(g); !damaged[f][int(r)] {
				k++
			}
		}
		tails = append(tails, k)
	}
	return tails, nil
}
