package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// Preemption is how a scenario's job is stopped and resumed: it starts as
// World ranks (Options.Shard), and at each Stop every rank stops, its state
// is saved, and the job goes on from the states, perhaps as another number
// of ranks, readers and devices (docs/determinism.md).
type Preemption struct {
	World int
	Stops []Stop
}

// Stop is one preemption: in epoch Epoch, every rank commits the batches
// before index At and stops (Close). Killed, the process is gone and the
// state it resumes from is the last checkpoint's, taken after Checkpoint
// batches: what was consumed after it is lost with the process. Then the
// job goes on as World ranks of Threads readers and Devices devices, from
// the states of all its ranks (actors.Options.Resume), or, with Own, each
// rank from its own (the same World only).
type Stop struct {
	Epoch, At  int
	Killed     bool
	Checkpoint int
	// Lag[r], when given, is how many batches fewer rank r commits before
	// it stops, and its checkpoint holds: ranks rarely stop at the same
	// step, nor checkpoint at the same age.
	Lag     []int
	Own     bool
	World   int
	Threads int
	Devices int
	Lanes   int // actors.Options.Lanes; 0 or 1: none
}

// lag is how many batches fewer than the stop's rank r commits.
func (s *Stop) lag(rank int) int {
	if rank < len(s.Lag) {
		return s.Lag[rank]
	}
	return 0
}

// GeneratePreemption is scenario seed's shape and faults made fit for a
// job that is preempted, and the preemptions, drawn from a stream of their
// own. The shape keeps what a state needs (the order, no multi-pass stage,
// the pad remainder) and nothing that drops batches (drop_last, dropping a
// partial step); the faults keep those a run survives (no storms, no
// truncation, no probabilistic read errors, damage only when skipped).
//
// A feed queue has no state to resume from (docs/determinism.md, Limits):
// every preempted job reads files.
func GeneratePreemption(seed uint64) Scenario {
	sc := generateFiles(seed)
	sh := &sc.Shape
	sh.AnyOrder, sh.DropLast, sh.DropPartial = false, false, false
	sc.Faults = slices.DeleteFunc(sc.Faults, func(f Fault) bool {
		switch f.Kind {
		case sim.PanicStorm, sim.Truncate, sim.ReadErrorP:
			return true
		case sim.FlipChunk:
			return !sh.Skip
		}
		return false
	})
	rng := rand.New(rand.NewPCG(seed, 0x9e3))
	pre := &Preemption{World: 1 + rng.IntN(4)}
	for range 1 + rng.IntN(3) {
		st := Stop{Epoch: rng.IntN(sh.epochs()), At: rng.IntN(12), Killed: rng.IntN(3) == 0,
			Threads: 1 + rng.IntN(4), Devices: 1 + rng.IntN(3)}
		if st.Killed {
			st.Checkpoint = rng.IntN(st.At + 1)
		}
		pre.Stops = append(pre.Stops, st)
	}
	slices.SortStableFunc(pre.Stops, func(a, b Stop) int { return (a.Epoch*100 + a.At) - (b.Epoch*100 + b.At) })
	if sh.MultiPass == 0 {
		// A job goes on with as many lanes as it likes: drawn from a
		// generator of their own, so that the draws above stay what they
		// were before lanes existed.
		lanes := rand.New(rand.NewPCG(seed, 0x1a4e6))
		for i := range pre.Stops {
			pre.Stops[i].Lanes = 1 + lanes.IntN(3)
		}
	}
	drawWorlds(pre, seed, sh.MultiPass > 0)
	drawGlobalBatch(seed, sh)
	drawBlend(seed, sh)
	sc.Preempt = pre
	return sc
}

// drawGlobalBatch gives a third of the preempted jobs whose order reads
// no window a global batch (of at least the largest world, 4), from a
// generator of its own, so that the other draws of every seed stay what
// they were before global batches existed: their steps must be the
// uninterrupted job's across stops and resizes.
func drawGlobalBatch(seed uint64, sh *Shape) {
	rng := rand.New(rand.NewPCG(seed, 0x6b47c4))
	if sh.Shuffle > 1 || rng.IntN(3) != 0 {
		return
	}
	sh.GlobalBatch = 4 + rng.IntN(21)
}

// drawBlend blends half the preempted jobs over several token corpora in
// an order without a window, with weights of 1 to 4 per file; half of
// those in global batches reverse their weights at a global step (a
// curriculum change). It draws from a generator of its own, so that a
// seed's other draws do not depend on it.
func drawBlend(seed uint64, sh *Shape) {
	rng := rand.New(rand.NewPCG(seed, 0xb1e7d))
	if sh.Format != records.Megatron || sh.Files < 2 || sh.Shuffle > 1 || sh.AnyOrder || rng.IntN(2) != 0 {
		return
	}
	sh.Blend = make([]float64, sh.Files)
	for f := range sh.Blend {
		sh.Blend[f] = float64(1 + rng.IntN(4))
	}
	if sh.GlobalBatch > 0 && rng.IntN(2) == 0 {
		sh.BlendStep = 1 + rng.IntN(8)
	}
}

// blend is the shape's blend as a Files stage takes it: the weights, and
// the reversed weights from global step BlendStep on.
func (sh Shape) blend() (*order.Blend, []uint64) {
	if len(sh.Blend) == 0 {
		return nil, nil
	}
	b := &order.Blend{Weights: sh.Blend}
	if sh.BlendStep == 0 {
		return b, nil
	}
	b.Phases = []order.Phase{{Weights: slices.Clone(sh.Blend)}}
	slices.Reverse(b.Phases[0].Weights)
	return b, []uint64{uint64(sh.BlendStep)}
}

// blendOrder is the order of the shape's blend over its files, or nil
// without a blend. The checks use it to name the record that each id
// reads and the ids that each epoch holds.
func (sh Shape) blendOrder(seed uint64) *order.Order {
	b, steps := sh.blend()
	if b == nil {
		return nil
	}
	var splits []order.Split
	for f := range sh.Files {
		splits = append(splits, order.Split{File: f, Count: uint64(sh.Records)})
	}
	b, err := actors.BlendAt(actors.Files{Blend: b, BlendSteps: steps}, uint64(sh.Files*sh.Records),
		actors.Shard{GlobalBatch: sh.GlobalBatch, Remainder: order.Pad})
	if err != nil {
		panic(err) // the shape's blend is one the pipeline takes
	}
	// As actors.Files plans it: a Shuffle stage (global, or of a window
	// of 1) permutes each file's epochs.
	o, err := order.New(splits, order.Config{Seed: seed, Shuffle: sh.Global || sh.Shuffle > 0, Global: true, Files: sh.Files, Blend: b})
	if err != nil {
		panic(err)
	}
	return o
}

// drawWorlds draws, from streams of their own, the world each stop goes on
// as, whether its ranks resume from their own states, and how many
// batches each rank stops short of the stop. A multi-pass job goes on as
// its own ranks: its ranks go on into the next epoch of the pass while the
// stop's waits, which only a rank's own state can say.
func drawWorlds(pre *Preemption, seed uint64, multiPass bool) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3+1))
	lags := rand.New(rand.NewPCG(seed, 0x1a6))
	world := pre.World
	for i := range pre.Stops {
		st := &pre.Stops[i]
		st.World = world
		if rng.IntN(2) == 0 && !multiPass {
			st.World = 1 + rng.IntN(4)
		}
		st.Own = multiPass || (st.World == world && rng.IntN(3) == 0)
		if lags.IntN(2) == 0 {
			for range world {
				st.Lag = append(st.Lag, lags.IntN(4))
			}
		}
		world = st.World
	}
}

// describe is the preemptions in a few words.
func (p *Preemption) describe() string {
	parts := []string{fmt.Sprintf("%d rank(s)", p.World)}
	for _, s := range p.Stops {
		how := "stop"
		if s.Killed {
			how = fmt.Sprintf("kill (checkpoint %d)", s.Checkpoint)
		}
		if len(s.Lag) > 0 {
			how += fmt.Sprintf(" (ranks %v batches short)", s.Lag)
		}
		to := fmt.Sprintf("%d rank(s)", s.World)
		if s.Own {
			to += " each from its own state"
		}
		if s.Lanes > 1 {
			to += fmt.Sprintf(" of %d lanes", s.Lanes)
		}
		parts = append(parts, fmt.Sprintf("%s at epoch %d batch %d -> %s", how, s.Epoch, s.At, to))
	}
	return strings.Join(parts, ", ")
}

// delivered is a batch a rank's devices committed: where it lies in the
// order, and its samples.
type delivered struct {
	epoch          int
	world, rank    int
	index, padding int
	ids            []uint64
	elastic        bool // in an epoch re-dealt part way: its order is no reference's
}

// segment runs one rank from state st: its epochs up to the stop (nil: to
// the job's end), and returns what it committed and its state at the stop.
type segment struct {
	sc      Scenario
	paths   []string
	o       Options
	d       *disk
	rank    int
	world   int
	threads int
	devices int
	lanes   int
	states  []actors.State // the job's, every rank's, sorted by rank (nil: the job starts)
	own     bool           // the rank resumes from its own state alone
	stop    *Stop
	live    bool // faults injected (the reference runs have none but the damage)
	fired   map[sim.FaultKind]int
}

// run runs the segment.
func (g segment) run(ctx context.Context) ([]delivered, *actors.State, error) {
	sh := g.sc.Shape
	if g.firstEpoch() >= sh.epochs() {
		return nil, g.done(), nil // the job is done: a pipeline would start its next epoch at once
	}
	stages := chain(g.sc, g.paths)
	blend, steps := sh.blend()
	stages[0] = actors.Files{Paths: entries(sh, g.paths), Threads: g.threads, Blend: blend, BlendSteps: steps}
	var faults []Fault
	if g.live {
		faults = g.sc.Faults
	}
	sys := actors.NewSystem()
	panics := scheduledPanics(faults)
	opts := pipelineOptions(sh, g.o, sys, g.d, panics)
	opts.Shard, opts.Resume, opts.Lanes = g.shard(), g.states, g.lanes
	if sh.GlobalBatch > 0 {
		stepBatches(stages, opts.Shard.StepBatch())
	}
	if own := g.ownState(); own != nil && g.own {
		opts.Resume = []actors.State{*own}
	}
	// Stopped by index where a batch of holes cannot keep the count of
	// committed batches from reaching the stop.
	damage := slices.ContainsFunc(g.sc.Faults, func(f Fault) bool { return f.Kind == sim.FlipChunk })
	h := &stopHook{stop: g.stop, rank: g.rank, byIndex: g.stop != nil && g.stop.World != g.world && !damage}
	// A rank past the stop's epoch (it finished its share, the others had
	// not) waits there for the others: a synchronous job's ranks never
	// run an epoch apart.
	early := g.stop != nil && g.stop.Epoch < g.firstEpoch() || g.stopsIn(g.firstEpoch()) && h.arm(g.resumedState(), g.world)
	sc := g.sc
	sc.Shape.Devices = g.devices // the devices' own checks count this segment's
	dev := newDevices(sc, faults)
	inner := dev.step(&ledger{})
	// The devices step from the moment the pipeline exists: everything the
	// hook uses is set before it, or under its lock.
	rctx, cancel := context.WithTimeout(ctx, g.o.Deadline)
	defer cancel()
	h.cancel = cancel
	p, err := actors.NewDevices(stages, actors.Devices{N: g.devices, Step: h.step(inner)}, opts)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	h.p = p
	if h.killAtStart {
		if s, err := p.State(); err == nil {
			h.killed = &s
		}
	}
	h.mu.Unlock()
	if early {
		// The stop comes before the run delivers anything: its state is
		// where the job stood (the job's start, or its states re-dealt).
		h.stopped.Store(true)
	} else {
		err = g.passes(rctx, p, h)
	}
	closeErr := p.Close()
	if left := registered.Actors(sys); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("actors left in the registry: %v", left))
	}
	if msgs := dev.violations(); len(msgs) > 0 {
		err = errors.Join(err, errors.New(strings.Join(msgs, "; ")))
	}
	if g.fired != nil {
		for _, m := range []map[sim.FaultKind]int{dev.fired(), panics.fired()} {
			for k, v := range m {
				g.fired[k] += v
			}
		}
	}
	st, serr := p.State()
	if h.killed != nil {
		st = *h.killed
	}
	return h.kept(g.world, g.rank, st), &st, errors.Join(err, closeErr, serr)
}

// passes runs the pipeline's passes to the job's end or the stop. A pass
// is an epoch, or a multi-pass stage's epochs; e is each pass's first (the
// segment's first pass may start part way into one).
func (g segment) passes(ctx context.Context, p *actors.Pipeline, h *stopHook) error {
	first, per := g.firstEpoch(), g.sc.Shape.perPass()
	for e := first; e < g.sc.Shape.epochs(); e = (e/per + 1) * per {
		if e > first {
			// Armed before the pass's items can flow.
			if g.stopsIn(e) && h.arm(g.ownState(), g.world) {
				if h.killAtStart {
					if s, err := p.State(); err == nil {
						h.killed = &s
					}
				}
				return nil // the stop comes before this run delivers anything of the epoch
			}
			if err := p.Reset(); err != nil {
				return err
			}
		}
		err := p.Run(ctx)
		if h.stopped.Load() {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: epoch %d: %w", errHang, e, err)
		}
		if g.stopsIn(e) {
			return nil // the stop's batch lies past the rank's share: it stops at the pass's end
		}
	}
	return nil
}

// stopHook wraps a device step: it records what the devices commit, and in
// the stop's epoch lets target batches be committed, then stops the run.
// With byIndex (a stop the ranks are re-dealt after, which must leave every
// rank at the same position) those are the batches before At, exactly;
// otherwise the first target to start, in whatever order the devices take
// them (a state then has batches committed past its position). Killed, it
// takes the checkpoint's state when ckpt batches are in.
type stopHook struct {
	stop     *Stop
	rank     int
	byIndex  bool
	p        *actors.Pipeline
	cancel   context.CancelFunc
	mu       sync.Mutex
	got      []actors.Item
	armed    bool
	target   int // batches of the stop's epoch to commit
	ckpt     int
	inEpoch  int // of them committed
	inflight int // of them being stepped
	killed   *actors.State
	// killAtStart: the checkpoint is the state before the stop's epoch
	// delivers anything in this run.
	killAtStart bool
	stopped     atomic.Bool
}

// arm sets the stop up for its epoch, which the run (world ranks) resumed
// from st may start part way into, and reports whether the stop comes
// before the run delivers any of it. Re-dealt to another world, the
// epoch's rest starts afresh.
func (h *stopHook) arm(st *actors.State, world int) bool {
	// st is the rank's state as the run resumes from it (nil when the
	// epoch's rest is re-dealt to batches numbered from 0).
	start, skipped := 0, 0
	e := h.stop.Epoch
	if st != nil {
		if st.Epoch == e {
			start = stepAt(*st)
		}
		for _, b := range st.Beyond { // delivered before: the resumed run skips them
			if be, i := beyondAt(*st, b); be == e && i < h.stop.At-h.stop.lag(h.rank) {
				skipped++
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lag := h.stop.lag(h.rank)
	h.armed, h.target, h.ckpt = true, h.stop.At-lag-start-skipped, h.stop.Checkpoint-lag-start
	h.killAtStart = h.stop.Killed && h.ckpt <= 0
	return h.target <= 0
}

// shard is the segment's rank of its world.
func (g segment) shard() actors.Shard {
	return actors.Shard{Rank: g.rank, World: g.world, Remainder: order.Pad, GlobalBatch: g.sc.Shape.GlobalBatch}
}

// stepBatches makes the batch stage of stages batch n samples, a rank's
// slice of a global step.
func stepBatches(stages []actors.Stage, n int) {
	for i, s := range stages {
		if b, ok := s.(actors.Batch); ok {
			b.Size = n
			stages[i] = b
		}
	}
}

// resumedState is the state the rank's run resumes from where its batches'
// indexes follow from it: its own (ownState), or, under a global batch,
// the rank's share of the job's states re-dealt (actors.Rejoin), whose
// batches go on numbering the epoch's global steps; nil when the epoch's
// rest is re-dealt to batches numbered from 0.
func (g segment) resumedState() *actors.State {
	if own := g.ownState(); own != nil || g.sc.Shape.GlobalBatch == 0 || len(g.states) == 0 {
		return own
	}
	st, err := actors.Rejoin(g.states, g.shard())
	if err != nil {
		return nil // the run refuses the states, and says why
	}
	return &st
}

// stepAt is the index of the batch that a run resumed from st delivers
// first in st's epoch: under a global batch the global step (the layout's
// first step, and the steps done in it), otherwise the batches done.
func stepAt(st actors.State) int {
	return int(st.Layout.FirstStep) + int(st.Done)/st.Unit
}

// stopsIn says whether the segment's stop is in the pass that epoch e is
// in (from e on).
func (g segment) stopsIn(e int) bool {
	per := g.sc.Shape.perPass()
	return g.stop != nil && g.stop.Epoch >= e && g.stop.Epoch < (e/per+1)*per
}

// firstEpoch is the epoch the segment starts in: its own state's, or the
// earliest of the job's states when they are re-dealt (a rank that
// finished its share of an epoch stands at the next one's start).
func (g segment) firstEpoch() int {
	if len(g.states) == 0 {
		return 0
	}
	if own := g.ownState(); own != nil {
		return own.Epoch
	}
	return slices.MinFunc(g.states, func(a, b actors.State) int { return cmp.Compare(a.Epoch, b.Epoch) }).Epoch
}

// ownState is the state the rank goes on from as the uninterrupted run
// would: its own, when it resumes from it alone (Own), or when every rank
// stopped at the same step with nothing committed past it and the world
// is the same (actors.Options.Resume); nil when the job starts or what is
// left of its epoch is re-dealt.
func (g segment) ownState() *actors.State {
	if len(g.states) != g.world {
		return nil // the job starts, or goes on as another number of ranks
	}
	mine := &g.states[g.rank]
	if g.own || len(g.states) == 1 { // one state on its own world goes on by itself (actors.Rejoin)
		return mine
	}
	for _, st := range g.states {
		if st.Epoch != mine.Epoch || st.Done != mine.Done || len(st.Beyond) > 0 || st.Layout.World != g.world {
			return nil
		}
	}
	return mine
}

// done is the state of a rank of a job that is done: its own, or the
// job's end as one of the new world's ranks.
func (g segment) done() *actors.State {
	if own := g.ownState(); own != nil {
		return own
	}
	st := slices.MaxFunc(g.states, func(a, b actors.State) int { return cmp.Compare(a.Epoch, b.Epoch) })
	st.Rank, st.Layout, st.Done, st.Beyond = g.rank, order.Full(st.Positions(), g.world, st.Layout.GlobalBatch), 0, nil
	if n := g.shard().StepBatch(); n > 0 {
		st.Unit = n // the rank's slice of a step, not the state's rank's
	}
	return &st
}

// admit says whether a step of item it may go on; the stop's batches past
// the target wait for the stop instead.
func (h *stopHook) admit(it actors.Item) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || it.Epoch != h.stop.Epoch {
		return true
	}
	if h.byIndex {
		return it.Index < h.stop.At-h.stop.lag(h.rank)
	}
	if h.inEpoch+h.inflight >= h.target {
		return false
	}
	h.inflight++
	return true
}

func (h *stopHook) step(inner actors.StepFunc) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) (err error) {
		if !h.admit(it) {
			<-ctx.Done() // past the stop: never committed
			return ctx.Err()
		}
		committed := false
		defer func() { h.done(it, committed) }()
		if err := inner(ctx, it); err != nil {
			return err
		}
		committed = true
		return nil
	}
}

// done records a step's end (a panic's too).
func (h *stopHook) done(it actors.Item, committed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	inStop := h.armed && it.Epoch == h.stop.Epoch
	if inStop && !h.byIndex {
		h.inflight--
	}
	if !committed {
		return
	}
	h.got = append(h.got, actors.Item{Epoch: it.Epoch, Index: it.Index, Padding: it.Padding, IDs: slices.Clone(it.IDs)})
	if !inStop {
		return
	}
	h.inEpoch++
	if h.stop.Killed && h.killed == nil && h.inEpoch >= h.ckpt {
		if h.p == nil {
			h.killAtStart = true // reached while the pipeline was being built: taken once it is
		} else if st, err := h.p.State(); err == nil {
			h.killed = &st // this step's own batch is not in it
		}
	}
	if h.inEpoch >= h.target {
		h.stopped.Store(true)
		h.cancel()
	}
}

// kept is what the segment delivered for good: all it committed, or, when
// it was killed, what its checkpoint covers.
func (h *stopHook) kept(world, rank int, st actors.State) []delivered {
	var out []delivered
	for _, it := range h.got {
		if h.killed != nil && !covered(st, it) {
			continue
		}
		out = append(out, delivered{epoch: it.Epoch, world: world, rank: rank, index: it.Index, padding: it.Padding, ids: it.IDs})
	}
	return out
}

// covered says whether a state's position is past a committed item.
func covered(st actors.State, it actors.Item) bool {
	if it.Epoch < st.Epoch {
		return true
	}
	first := int(st.Layout.FirstStep) // under a global batch: the steps the layout began after
	if it.Epoch == st.Epoch && (it.Index < first || uint64(it.Index-first)*uint64(st.Unit) < st.Done) {
		return true
	}
	return slices.ContainsFunc(st.Beyond, func(b uint64) bool {
		e, i := beyondAt(st, b)
		return e == it.Epoch && i == it.Index
	})
}

// beyondAt is the epoch and index of the item a state's Beyond entry b
// names: past the state's epoch's share, it is in the epochs after it (a
// multi-pass pass's).
func beyondAt(st actors.State, b uint64) (int, int) {
	rem, _ := order.ParseRemainder(st.Remainder)
	share := st.Layout.Share(st.Rank, rem)
	if b < share {
		return st.Epoch, int(st.Layout.FirstStep) + int(b)/st.Unit
	}
	full := order.Full(st.Positions(), st.Layout.World, st.Layout.GlobalBatch).Share(st.Rank, rem)
	k := (b - share) / full
	return st.Epoch + 1 + int(k), int(b-share-k*full) / st.Unit
}

// runPreempted is Run for a preempted scenario.
func runPreempted(ctx context.Context, sc Scenario, paths []string, damaged []map[int]bool, o Options, leaks goleak.Option,
	res *Result, violate violation) {
	n, err := runPreempt(ctx, sc, paths, damaged, o, violate, res.Fired)
	res.Samples = n
	if ctx.Err() != nil {
		res.Verdict, res.Violations = sim.Stopped, nil
		return
	}
	if err != nil {
		res.Err = err
		violate("%v", err)
	}
	if !o.NoLeakCheck {
		if err := goleak.Find(leaks); err != nil {
			violate("goroutines left after shutdown: %v", err)
		}
	}
}

// runPreempt runs a preempted job to its end, and its uninterrupted
// references, and checks what they delivered.
func runPreempt(ctx context.Context, sc Scenario, paths []string, damaged []map[int]bool, o Options, violate violation,
	fired map[sim.FaultKind]int) (int, error) {
	pre := sc.Preempt
	d := newDisk(entries(sc.Shape, paths), sc.Faults, sc.Seed)
	defer func() {
		for k, v := range d.counts() {
			fired[k] += v
		}
	}()
	var all []delivered
	var states []actors.State // every rank's, at the last stop
	world, threads, devices, lanes := pre.World, sc.Shape.Threads, sc.Shape.Devices, sc.Shape.Lanes
	own := false
	elastic := map[int]bool{} // the epochs re-dealt part way
	for i := 0; i <= len(pre.Stops); i++ {
		var stop *Stop
		if i < len(pre.Stops) {
			stop = &pre.Stops[i]
		}
		next := make([]actors.State, world)
		for r := range world {
			g := segment{sc: sc, paths: paths, o: o, d: d, rank: r, world: world, threads: threads, devices: devices,
				lanes: lanes, states: states, own: own, stop: stop, live: true, fired: fired}
			if r == 0 && len(states) > 0 && g.ownState() == nil && !evenSteps(sc.Shape, states) {
				elastic[g.firstEpoch()] = true
			}
			got, st, err := g.run(ctx)
			for k := range got {
				got[k].elastic = elastic[got[k].epoch]
			}
			all = append(all, got...)
			if err != nil {
				return len(all), fmt.Errorf("rank %d of %d, before stop %d: %w", r, world, i, err)
			}
			next[r] = *st
		}
		if stop == nil {
			break
		}
		states, own = next, stop.Own
		world, threads, devices, lanes = stop.World, stop.Threads, stop.Devices, stop.Lanes
	}
	checkPreempted(violate, sc, all, damaged, elastic)
	return len(all), checkAgainstReferences(ctx, violate, sc, paths, o, all)
}

// evenSteps says whether a job's ranks all stopped at the same global step
// (no batch committed past it): re-dealt to any world, the job's batch k
// is then the uninterrupted run's batch k of that world, which the
// references check, as the global batch promises (docs/tokens.md).
func evenSteps(sh Shape, states []actors.State) bool {
	if sh.GlobalBatch == 0 {
		return false
	}
	for _, st := range states {
		if st.Epoch != states[0].Epoch || stepAt(st) != stepAt(states[0]) || len(st.Beyond) > 0 {
			return false
		}
	}
	return true
}

// checkPreempted checks the job's deliveries: every undamaged sample once
// in every epoch (padding aside), and, where nothing was damaged and the
// epoch was not re-dealt part way (elastic), equal batch counts for the
// ranks of each world. A re-dealt epoch's old ranks stopped where they
// stopped; what is left of it may be padding alone, which a new world does
// not deliver, so whether it was re-dealt is not told by its deliveries.
func checkPreempted(violate violation, sc Scenario, all []delivered, damaged []map[int]bool, elastic map[int]bool) {
	var records []uint64 // the undamaged records: each epoch's ids, but a blend's
	anyDamage := false
	for f := range sc.Shape.Files {
		for r := range sc.Shape.Records {
			if damaged[f][r] {
				anyDamage = true
				continue
			}
			records = append(records, messages.SampleID(f, r))
		}
	}
	blend := sc.Shape.blendOrder(sc.Seed)
	if i := slices.IndexFunc(all, func(d delivered) bool { return d.epoch >= sc.Shape.epochs() }); i >= 0 {
		violate("a batch of epoch %d, past the job's %d: its passes did not end where the uninterrupted run's do", all[i].epoch, sc.Shape.epochs())
	}
	for e := range sc.Shape.epochs() {
		var got []uint64
		counts := map[[2]int]int{}
		for _, dl := range all {
			if dl.epoch == e {
				got = append(got, dl.ids[:len(dl.ids)-dl.padding]...)
				counts[[2]int{dl.world, dl.rank}]++
			}
		}
		want := records
		if blend != nil {
			want = blendIDs(blend, uint64(e))
		}
		if msg := sameSet(want, got, 0, 0); msg != "" {
			violate("epoch %d: %s", e, msg)
		}
		if anyDamage || elastic[e] {
			continue
		}
		for k, n := range counts {
			if other := counts[[2]int{k[0], 0}]; n != other {
				violate("epoch %d: rank %d of %d got %d batches, rank 0 %d", e, k[1], k[0], n, other)
			}
		}
	}
}

// blendIDs is the ids of epoch e of a blend: each file's positions in it,
// named by the file's count of positions before them in the run.
func blendIDs(o *order.Order, e uint64) []uint64 {
	ep := o.Epoch(e)
	ids := make([]uint64, 0, o.Len())
	for g := range o.Len() {
		f, q := ep.At(g)
		ids = append(ids, messages.SampleID(f, int(q)))
	}
	return ids
}

// checkAgainstReferences checks every batch delivered outside a re-dealt
// epoch against the uninterrupted run of its world: the same batch at the
// same index of the same epoch, to the sample.
func checkAgainstReferences(ctx context.Context, violate violation, sc Scenario, paths []string, o Options, all []delivered) error {
	refs := map[[2]int]map[[2]int][]uint64{} // (world, rank) -> (epoch, index) -> ids
	ref := Scenario{Seed: sc.Seed, Shape: sc.Shape, Faults: staticOnly(sc.Faults)}
	for _, dl := range all {
		if dl.elastic {
			continue
		}
		key := [2]int{dl.world, dl.rank}
		if refs[key] == nil {
			g := segment{sc: ref, paths: paths, o: o, d: newDisk(entries(sc.Shape, paths), nil, sc.Seed), rank: dl.rank, world: dl.world,
				threads: sc.Shape.Threads, devices: 1, lanes: sc.Shape.Lanes}
			got, _, err := g.run(ctx)
			if err != nil {
				return fmt.Errorf("the reference run of rank %d of %d: %w", dl.rank, dl.world, err)
			}
			refs[key] = map[[2]int][]uint64{}
			for _, r := range got {
				refs[key][[2]int{r.epoch, r.index}] = r.ids
			}
		}
		if want := refs[key][[2]int{dl.epoch, dl.index}]; !slices.Equal(want, dl.ids) {
			violate("epoch %d, rank %d of %d, batch %d: not the uninterrupted run's batch", dl.epoch, dl.rank, dl.world, dl.index)
			return nil
		}
	}
	return nil
}
