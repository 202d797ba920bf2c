package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
)

// Shard is this process's part of a data set that World ranks read
// together (a distributed trainer's data-parallel ranks): a contiguous,
// equal share of every epoch's order, disjoint from the other ranks'
// (docs/determinism.md), or with GlobalBatch its slice of every global
// step. The zero value is one rank reading everything.
type Shard struct {
	Rank, World int
	// Remainder says what happens to the positions of an epoch that do
	// not divide evenly among the ranks (or, with GlobalBatch, into whole
	// steps): order.Drop (the default) leaves them out, order.Pad repeats
	// the first positions and marks them in Item.Padding.
	Remainder order.Remainder
	// GlobalBatch, when not 0, deals every epoch in global steps of this
	// many samples: step k is positions [k*GlobalBatch, (k+1)*GlobalBatch)
	// of the epoch's order whatever World is, and each rank takes its
	// slice of every step (StepBatch), so that a job resized between
	// steps sees the same samples at every step. The pipeline's Batch
	// stage must batch StepBatch samples, and the order must permute no
	// record within windows (the global order, or none).
	GlobalBatch int
}

func (s Shard) world() int { return max(s.World, 1) }

// StepBatch is the rank's batch under GlobalBatch: its slice of a global
// step, GlobalBatch/World samples or one more (the first GlobalBatch mod
// World ranks). Without GlobalBatch it is 0.
func (s Shard) StepBatch() int {
	if s.GlobalBatch <= 0 {
		return 0
	}
	_, n := order.StepSlice(uint64(s.GlobalBatch), s.world(), s.Rank)
	return int(n)
}

func (s Shard) check() error {
	switch {
	case s.World < 0 || s.World > MaxWorld || s.Rank < 0 || s.Rank >= s.world():
		return fmt.Errorf("%w: shard rank %d of world %d: want 0 <= rank < world <= %d", ErrBadSpec, s.Rank, s.World, MaxWorld)
	case s.GlobalBatch < 0 || s.GlobalBatch > MaxBatch:
		return fmt.Errorf("%w: shard: a global batch of %d samples is not from 0 to %d", ErrBadSpec, s.GlobalBatch, MaxBatch)
	case s.GlobalBatch > 0 && s.GlobalBatch < s.world():
		return fmt.Errorf("%w: shard: a global batch of %d samples among %d ranks leaves a rank none: give at least one a rank", ErrBadSpec, s.GlobalBatch, s.world())
	}
	return nil
}

// MaxWorld bounds Shard.World.
const MaxWorld = 1 << 16

// DefaultSplitRecords is how many records a split of a file in a format
// without chunks (IDX) holds: the unit the order permutes, and a reader
// reads sequentially.
const DefaultSplitRecords = 1024

// orderPlan is a pipeline's order: the order function over its files, the
// shard, and where its first pass starts (the epoch and the layout of a
// resumed state). What the order's assembly reads of it is protocol.Plan's.
type orderPlan struct {
	protocol.Plan
	shuffled bool // the splits are permuted (a Shuffle stage follows Files)
	data     Fingerprint
	files    *fileSource          // its names and times, for a refused state's message
	multi    []protocol.PassSplit // the multi-pass stages', from open_files on
	span     uint64               // the positions of a data service task (taskSpan)
	blend    *order.Blend         // the order's blend, its phases at positions (BlendAt); nil for none
}

// Fingerprint identifies a data set: a state taken over one resumes only
// over the same files.
type Fingerprint struct {
	Files   int    `json:"files"`
	Records uint64 `json:"records"`
	Splits  int    `json:"splits"`
	// SHA256 (first 16 bytes, hex) of every file's base name, size,
	// records and splits, in list order.
	Sum string `json:"sum"`
	// Modified is when the newest of the files (or objects' versions) was
	// written, to the second, in UTC. It is no part of the data's
	// identity (a copy of the files is the same data set), but a state
	// refused over another data set names the files written after it: the
	// sum alone cannot say which.
	Modified time.Time `json:"modified,omitzero"`
}

// same says whether a and b are the same data set.
func (a Fingerprint) same(b Fingerprint) bool {
	return a.Files == b.Files && a.Records == b.Records && a.Splits == b.Splits && a.Sum == b.Sum
}

// planOrder sets up a Files source: its files, and, unless it reads in any
// order, the order over them. A Shuffle stage right after Files gives the
// order its seed and window; the first Batch stage its positions an item,
// when every stage before it keeps items whole (maps).
func (p *Pipeline) planOrder(ctx context.Context, stages []Stage) error {
	f, ok := stages[0].(Files)
	if !ok {
		return nil
	}
	opts := p.pipe.opts
	fs, err := newFileSource(f.Paths, opts.Open)
	if err != nil {
		return err
	}
	p.files = fs
	if f.AnyOrder {
		if f.Blend != nil {
			return fmt.Errorf("%w: a blend is an order of the records: Files.AnyOrder must be false", ErrBadSpec)
		}
		if sh, ok := stageAt[Shuffle](stages, 1); ok && sh.Global {
			return fmt.Errorf("%w: a global shuffle is an order of the records: Files.AnyOrder must be false", ErrBadSpec)
		}
		if len(opts.Resume) > 0 || opts.Shard.world() > 1 {
			return fmt.Errorf("%w: a shard or a resumed state needs the order: Files.AnyOrder must be false", ErrBadSpec)
		}
		return nil
	}
	var seed uint64
	window, shuffled, global := 1, false, false
	if sh, ok := stageAt[Shuffle](stages, 1); ok {
		seed, window, shuffled, global = sh.Seed, sh.Window, true, sh.Global
	}
	switch {
	case (global || f.Blend != nil) && len(f.Paths) >= messages.MaxFiles:
		return fmt.Errorf("%w: a global order reads at most %d files", ErrBadSpec, messages.MaxFiles-1)
	case f.Blend != nil && window > 1:
		return fmt.Errorf("%w: a blend reads its files by position: shuffle it globally (each file's epochs are permuted) or not at all, not in a window of %d", ErrBadSpec, window)
	}
	global = global || f.Blend != nil
	fs.positional = global
	threads, _ := f.readers(len(f.Paths)) // indexing: a file each
	splits, fp, err := splitsOf(ctx, fs, opts, threads, &p.pipe.corrupt)
	if sh, _ := stageAt[Shuffle](stages, 1); global && f.Blend == nil && sh.OrWindow > 0 && errors.Is(err, readers.ErrNotPositional) {
		// Shuffle.OrWindow: the data set is shuffled in a window instead.
		p.windowed, global, window, fs.positional = err, false, sh.OrWindow, false
		splits, fp, err = splitsOf(ctx, fs, opts, threads, &p.pipe.corrupt)
	}
	if err != nil {
		if f.Blend != nil && errors.Is(err, readers.ErrNotPositional) {
			return fmt.Errorf("a blend reads every file by position, and cannot read one in a window: %w", err)
		}
		return err
	}
	if global {
		splits = fileRuns(splits)
	}
	blend, err := BlendAt(f, fp.Records, opts.Shard)
	if err != nil {
		return err
	}
	ord, err := order.New(splits, order.Config{Seed: seed, Shuffle: shuffled, Window: window, Global: global, Files: len(f.Paths),
		Block: blockRecords(fs.recordBytes), Blend: blend})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	plan := &orderPlan{shuffled: shuffled, data: fp, files: fs, blend: blend, Plan: protocol.Plan{Ord: ord, Unit: opts.GroupSize,
		Rank: opts.Shard.Rank, World: opts.Shard.world(), Remainder: opts.Shard.Remainder, GlobalBatch: uint64(opts.Shard.GlobalBatch),
		Lanes: opts.Lanes}}
	p.placeStages(stages, plan)
	if err := p.checkGlobalBatch(opts.Shard, plan); err != nil {
		return err
	}
	// A window of the order is ord.Span() positions, unshuffled too (where
	// none is permuted): what a task reads whole.
	plan.span = taskSpan(uint64(ord.Span()), uint64(plan.Unit), ord.Len()/uint64(max(ord.Splits(), 1)))
	if err := plan.start(opts.Resume, opts.Epoch); err != nil {
		return err
	}
	plan.splitPasses(stages)
	p.order = plan
	fs.epochOf = func(pass uint32) (uint64, uint64) { return seed, uint64(plan.Epoch(pass)) }
	if global {
		p.gather = newGatherSource(fs, &plan.Plan)
	}
	return nil
}

// BlendAt is f's blend with its phases' positions set from the global
// steps they start at (Files.BlendSteps), over records records: what a
// pipeline of shard blends, and what verify-ids checks against.
func BlendAt(f Files, records uint64, shard Shard) (*order.Blend, error) {
	if f.Blend == nil || len(f.BlendSteps) == 0 {
		return f.Blend, nil
	}
	switch {
	case shard.GlobalBatch == 0:
		return nil, fmt.Errorf("%w: a blend's phases start at global steps, and the shard has no global batch", ErrBadSpec)
	case len(f.BlendSteps) != len(f.Blend.Phases):
		return nil, fmt.Errorf("%w: %d steps for a blend's %d phases", ErrBadSpec, len(f.BlendSteps), len(f.Blend.Phases))
	}
	b := *f.Blend
	b.Phases = slices.Clone(b.Phases)
	samples := cmp.Or(b.Samples, records)
	for i, step := range f.BlendSteps {
		b.Phases[i].From = order.StepStart(step, samples, uint64(shard.GlobalBatch), shard.Remainder)
	}
	return &b, nil
}

// ordered is stages as planOrder planned them: a global Shuffle that fell
// back to its window (Shuffle.OrWindow) is that window.
func (p *Pipeline) ordered(stages []Stage) []Stage {
	if p.windowed == nil {
		return stages
	}
	sh := stages[1].(Shuffle)
	stages = slices.Clone(stages)
	stages[1] = Shuffle{Window: sh.OrWindow, Seed: sh.Seed}
	return stages
}

// Windowed is why a global Shuffle with an OrWindow shuffles in that
// window instead: an error wrapping readers.ErrNotPositional that names
// the file whose records cannot be read by position. It is nil otherwise.
func (p *Pipeline) Windowed() error { return p.windowed }

// blockBytes bounds the bytes of a block of an order that permutes no
// record (order.Config.Block), which the order's assembler holds while
// its records come in: order.Block records of a few KB, fewer of large
// ones (a token corpus's samples at seq_len 2048 are 32 KB; 4,096 of them
// held 134 MB).
const blockBytes = 8 << 20

// blockRecords is the block for records of recordBytes: order.Block, or
// as many as fit blockBytes, at least 64.
func blockRecords(recordBytes int64) int {
	if recordBytes <= 0 {
		return order.Block
	}
	return int(min(order.Block, max(64, blockBytes/recordBytes)))
}

// fileRuns joins the splits that continue each other in a file: a global
// order locates a record among them, and needs no split of its own for
// every DefaultSplitRecords records.
func fileRuns(splits []order.Split) []order.Split {
	var out []order.Split
	for _, s := range splits {
		if n := len(out); n > 0 && out[n-1].File == s.File && out[n-1].First+out[n-1].Count == s.First {
			out[n-1].Count += s.Count
			continue
		}
		out = append(out, s)
	}
	return out
}

// splitPasses sets how the multi-pass stages map their passes to the
// order's, from the epoch pass 0 starts in: a pipeline resumed part way
// through a multi-pass stage's pass starts with the rest of that pass, so
// that its passes end where the uninterrupted run's do.
func (p *orderPlan) splitPasses(stages []Stage) {
	e := p.First
	for _, s := range stages {
		if m, ok := s.(MultiPass); ok {
			p.multi = append(p.multi, protocol.PassSplit{Passes: m.Passes, Skip: e % m.Passes})
			e /= m.Passes
		}
	}
}

// passSplit is the split of multi-pass stage i: the order's when there is
// one, none skipped otherwise.
func (p *Pipeline) passSplit(stages []Stage, i int) protocol.PassSplit {
	k := 0
	for _, s := range stages[:i] {
		if _, ok := s.(MultiPass); ok {
			k++
		}
	}
	if p.order != nil {
		return p.order.multi[k]
	}
	return protocol.PassSplit{Passes: stages[i].(MultiPass).Passes}
}

// passesOf is the order's passes [lo, hi) that the consumers' pass reads
// through the multi-pass stages.
func (p *orderPlan) passesOf(pass uint32) (lo, hi uint32) {
	lo, hi = pass, pass+1
	for i := len(p.multi) - 1; i >= 0; i-- {
		lo, hi = p.multi[i].First(lo), p.multi[i].Last(hi-1)+1
	}
	return lo, hi
}

// checkGlobalBatch says why the pipeline cannot deal shard's global
// batch, if it cannot: its Batch stage must batch the rank's slice of a
// step, and its order read no record it does not deliver (a window would
// be read whole by every rank, World times the reading).
func (p *Pipeline) checkGlobalBatch(shard Shard, plan *orderPlan) error {
	if shard.GlobalBatch == 0 {
		return nil
	}
	switch want := shard.StepBatch(); {
	case p.aligned == 0 || p.unplaced != "":
		return fmt.Errorf("%w: a global batch needs one Batch stage after the order, before any stage that loses the samples' places: each rank batches its slice of every step", ErrBadSpec)
	case plan.Unit != want:
		return fmt.Errorf("%w: a global batch of %d among %d ranks gives rank %d batches of %d samples, and the Batch stage batches %d: batch %d (Shard.StepBatch)",
			ErrBadSpec, shard.GlobalBatch, shard.world(), shard.Rank, want, plan.Unit, want)
	case plan.Ord.Window() > 1:
		return fmt.Errorf("%w: a global batch deals every step among all ranks, and a shuffle window of %d would be read whole by every rank: shuffle in the global order (a positional format: convert --to idx) or not at all",
			ErrBadSpec, plan.Ord.Window())
	}
	return nil
}

// placeStages finds the batch stage that batches the order's items one to
// one (plan.unit becomes its size), and the first stage, if any, that
// loses the items' places in the order.
func (p *Pipeline) placeStages(stages []Stage, plan *orderPlan) {
	for i, s := range stages[1:] {
		switch s := s.(type) {
		case Map, XMap, DoubleBuffer, MultiPass:
		case Shuffle:
			if i == 0 {
				continue // the order's
			}
			p.unplaced = fmt.Sprintf("stage %d (%s)", i+1, s.kind())
			return
		case Batch:
			if p.aligned == 0 {
				p.aligned, p.dropLast, plan.Unit = i+1, s.DropLast, s.Size
				continue
			}
			p.unplaced = fmt.Sprintf("stage %d (a second %s)", i+1, s.kind())
			return
		default:
			p.unplaced = fmt.Sprintf("stage %d (%s)", i+1, s.kind())
			return
		}
	}
}

// stageAt is stages[i] when it is an S.
func stageAt[S Stage](stages []Stage, i int) (S, bool) {
	var zero S
	if i >= len(stages) {
		return zero, false
	}
	s, ok := stages[i].(S)
	return s, ok
}
