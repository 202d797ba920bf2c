package order

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// Range is the positions [Lo, Hi) of an epoch's global order G.
type Range struct {
	Lo uint64 `json:"lo"`
	Hi uint64 `json:"hi"`
}

// Len is the number of positions in r.
func (r Range) Len() uint64 { return r.Hi - r.Lo }

// Segment is a run of a rank's sequence: positions of G, whether they are
// padding (repeats of positions dealt already, under Pad), and At, the
// rank's position (its count of positions from the start of its shard) of
// G position Lo.
type Segment struct {
	Range
	Pad bool
	At  uint64
}

// Layout is how the positions of an epoch still to be delivered are dealt.
// Ranges, in order, are concatenated into the sequence C. Without a global
// batch, C is cut into World equal contiguous shards, shard r for rank r.
// With GlobalBatch G, C is cut into global steps of G positions, and rank r
// takes the same slice of every step (StepSlice): step k is C[kG, (k+1)G)
// whatever World is, so that a job resized between steps trains on the
// same samples at every step. An epoch starts from Full; Regroup re-deals
// what is left part way through, to another number of ranks.
type Layout struct {
	World  int     `json:"world"`
	Ranges []Range `json:"ranges"`
	// GlobalBatch is the positions of one global step, or 0 for
	// contiguous shards. It is at least World: every rank takes at least
	// one position of every step.
	GlobalBatch uint64 `json:"global_batch,omitempty"`
	// FirstStep is the epoch's step that the layout's first step is: a
	// layout re-dealt part way through its epoch (Regroup) numbers its
	// steps on from where the ranks stopped.
	FirstStep uint64 `json:"first_step,omitempty"`
}

// Full is the layout of a whole epoch of n positions among world ranks,
// in steps of globalBatch positions (0: in contiguous shards).
func Full(n uint64, world int, globalBatch uint64) Layout {
	l := Layout{World: world, GlobalBatch: globalBatch}
	if n > 0 {
		l.Ranges = []Range{{0, n}}
	}
	return l
}

// StepSlice is rank's slice of a global step of n positions among world
// ranks: its offset in the step and its length. The first n mod world
// ranks take one position more than the others, so that slices differ by
// one at most.
func StepSlice(n uint64, world, rank int) (offset, length uint64) {
	w, r := uint64(world), uint64(rank)
	q, m := n/w, n%w
	return r*q + min(r, m), q + b2u(r < m)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Check reports a layout that cannot be dealt: no ranks, a global batch
// smaller than the world, or ranges that are empty, overlap or exceed n
// positions.
func (l Layout) Check(n uint64) error {
	if l.World < 1 {
		return fmt.Errorf("%w: world size %d", ErrBadOrder, l.World)
	}
	if l.GlobalBatch > 0 && l.GlobalBatch < uint64(l.World) {
		return fmt.Errorf("%w: a global batch of %d positions among %d ranks leaves a rank none", ErrBadOrder, l.GlobalBatch, l.World)
	}
	if l.FirstStep > 0 && (l.GlobalBatch == 0 || l.FirstStep > n) {
		return fmt.Errorf("%w: first step %d of a layout over %d positions in steps of %d", ErrBadOrder, l.FirstStep, n, l.GlobalBatch)
	}
	var last uint64
	for i, r := range l.Ranges {
		if r.Lo >= r.Hi || r.Hi > n || (i > 0 && r.Lo < last) {
			return fmt.Errorf("%w: range %d [%d, %d) of a layout over %d positions", ErrBadOrder, i, r.Lo, r.Hi, n)
		}
		last = r.Hi
	}
	return nil
}

// Total is the number of positions to deal.
func (l Layout) Total() uint64 {
	var t uint64
	for _, r := range l.Ranges {
		t += r.Len()
	}
	return t
}

// Share is the number of positions rank gets, padding included. Without
// a global batch every rank gets the same; with one, the steps times the
// rank's slice of a step. Under Drop the positions past the last whole
// share (or step) are left out; under Pad the last share (or step) is
// filled up with repeats.
func (l Layout) Share(rank int, rem Remainder) uint64 {
	t, w := l.Total(), uint64(l.World)
	if l.GlobalBatch > 0 {
		_, b := StepSlice(l.GlobalBatch, l.World, rank)
		return l.Steps(rem) * b
	}
	if rem == Pad {
		return (t + w - 1) / w
	}
	return t / w
}

// Steps is the number of global steps of a layout with a global batch
// (0 without one): the whole steps, and under Pad a last partial one
// filled up.
func (l Layout) Steps(rem Remainder) uint64 {
	if l.GlobalBatch == 0 {
		return 0
	}
	t := l.Total()
	k := t / l.GlobalBatch
	if rem == Pad && t%l.GlobalBatch != 0 {
		k++
	}
	return k
}

// StepReal is how many positions of global step k are not padding: the
// global batch, but for a padded last step.
func (l Layout) StepReal(k uint64) uint64 {
	t := l.Total()
	return min(l.GlobalBatch, t-min(t, k*l.GlobalBatch))
}

// Cut is rank's shard from its from-th position on: runs of G positions in
// the order the rank delivers them. Walk gives the same one at a time.
func (l Layout) Cut(rank int, rem Remainder, from uint64) []Segment {
	var out []Segment
	w := l.Walk(rank, rem, from)
	for s, ok := w.Next(); ok; s, ok = w.Next() {
		out = append(out, s)
	}
	return out
}

// Walk walks rank's shard from its from-th position on, segment by
// segment, holding one run of C at a time: with a global batch a shard is
// one run a step, and an epoch may have millions of steps.
func (l Layout) Walk(rank int, rem Remainder, from uint64) *Walk {
	w := &Walk{l: l, at: from, end: l.Share(rank, rem), total: l.Total(), pre: l.starts()}
	if l.GlobalBatch == 0 {
		w.base = uint64(rank) * w.end
	} else {
		w.offset, w.slice = StepSlice(l.GlobalBatch, l.World, rank)
	}
	return w
}

// Walk is a rank's shard, walked by Next.
type Walk struct {
	l             Layout
	at, end       uint64 // rank positions: the next one to walk, the shard's end
	total         uint64
	pre           []uint64 // the ranges' starts in C
	base          uint64   // without a global batch, the shard's start in C
	offset, slice uint64   // with one, the rank's slice of a step
	pending       []Segment
	next          int // pending's next segment
}

// Next is the next segment of the shard, false at its end.
func (w *Walk) Next() (Segment, bool) {
	if w.next == len(w.pending) {
		w.pending, w.next = w.pending[:0], 0
	}
	for len(w.pending) == 0 {
		if w.at >= w.end || w.total == 0 {
			return Segment{}, false
		}
		c, n := w.run()
		pad := c >= w.total
		if pad {
			c = w.padded(c)
		}
		n = min(n, w.total-c)
		at := w.at
		for _, sg := range w.l.span(w.pre, c, c+n, pad) {
			sg.At, at = at, at+sg.Len()
			w.pending = append(w.pending, sg)
		}
		w.at += n
	}
	w.next++
	return w.pending[w.next-1], true
}

// padded is the position that padding position c (past the layout's
// total) repeats. Without a global batch, the first positions dealt. With
// one, the last step's own positions, from its first: they are the same
// on every world and after every resize (a layout re-dealt from step s
// starts at step s, so its first positions are not the epoch's), so the
// padded step is the same batch wherever it is dealt.
func (w *Walk) padded(c uint64) uint64 {
	if g := w.l.GlobalBatch; g > 0 {
		last := w.total / g * g // the last step's first position
		return last + (c-w.total)%(w.total-last)
	}
	return (c - w.total) % w.total
}

// run is the C position of the rank's position at, and how many of the
// rank's positions from it follow one another in C.
func (w *Walk) run() (c, n uint64) {
	if w.l.GlobalBatch == 0 {
		return w.base + w.at, w.end - w.at
	}
	k, j := w.at/w.slice, w.at%w.slice
	return k*w.l.GlobalBatch + w.offset + j, min(w.slice-j, w.end-w.at)
}

// span maps positions [a, b) of C (b <= Total) to ranges of G, given the
// ranges' starts in C. It finds the range holding a by bisection, so that
// cutting every rank's shard of a layout of many ranges costs ranks x
// log(ranges), not ranks x ranges.
func (l Layout) span(pre []uint64, a, b uint64, pad bool) []Segment {
	i := sort.Search(len(l.Ranges), func(i int) bool { return pre[i]+l.Ranges[i].Len() > a })
	var out []Segment
	for ; i < len(l.Ranges) && pre[i] < b; i++ {
		r, at := l.Ranges[i], pre[i]
		if x, y := max(a, at), min(b, at+r.Len()); x < y {
			out = append(out, Segment{Range: Range{r.Lo + (x - at), r.Lo + (y - at)}, Pad: pad})
		}
	}
	return out
}

// starts are the positions, in C, where each range starts.
func (l Layout) starts() []uint64 {
	pre := make([]uint64, len(l.Ranges))
	var at uint64
	for i, r := range l.Ranges {
		pre[i], at = at, at+r.Len()
	}
	return pre
}

// Progress is what one rank of a layout delivered: the first Done
// positions of its shard, and past them the items of Unit positions (the
// batch size) that start at the shard positions in Beyond (consumers
// commit items out of order).
type Progress struct {
	Done   uint64
	Beyond []uint64
}

// Regroup is the layout of the positions not yet delivered when rank r
// has delivered progress[r] (one entry per rank of l, each checked by
// CheckProgress), dealt among world ranks in the same global batch: every
// position that no rank delivered, once, whatever step each rank stopped
// at. Items are unit positions, or with a global batch each rank's slice
// of a step. Padding is not carried over (it repeated positions dealt to a
// rank already), and under Drop neither is the dropped remainder. The
// positions left keep their order in C, so that when every rank stopped at
// the same global step, step k of the result is step k+stopped of l, and
// its FirstStep says so.
// Adjacent ranges are joined: without a global batch the result has at
// most len(l.Ranges) + l.World + the items in Beyond ranges, whatever the
// number of positions; with one, the ranks' progress differing by d steps
// adds up to d x World ranges more.
func (l Layout) Regroup(rem Remainder, unit uint64, progress []Progress, world int) Layout {
	var left []Range
	stopped := l.Steps(rem) // the steps every rank completed
	for r := range l.World {
		u := unit
		if l.GlobalBatch > 0 {
			_, u = StepSlice(l.GlobalBatch, l.World, r)
			stopped = min(stopped, progress[r].Done/u)
		}
		left = l.undelivered(left, r, rem, u, progress[r])
	}
	out := Layout{World: world, GlobalBatch: l.GlobalBatch}
	if l.GlobalBatch > 0 { // the ranks' slices interleave in C
		slices.SortFunc(left, func(a, b Range) int { return cmp.Compare(a.Lo, b.Lo) })
		out.FirstStep = l.FirstStep + stopped
	}
	for _, r := range left {
		out.Ranges = appendRange(out.Ranges, r)
	}
	return out
}

// undelivered appends to out the ranges of G that rank r of l has not
// delivered at progress pr, in its order.
func (l Layout) undelivered(out []Range, r int, rem Remainder, unit uint64, pr Progress) []Range {
	holes := pr.Beyond // sorted: each hides [b, b+unit)
	w := l.Walk(r, rem, pr.Done)
	for s, ok := w.Next(); ok; s, ok = w.Next() {
		if s.Pad {
			continue
		}
		at, end := s.At, s.At+s.Len() // rank positions of s, kept where no hole is
		for at < end {
			for len(holes) > 0 && holes[0]+unit <= at {
				holes = holes[1:]
			}
			stop := end
			if len(holes) > 0 && holes[0] < end {
				stop = max(holes[0], at)
			}
			if at < stop {
				out = appendRange(out, Range{s.Lo + (at - s.At), s.Lo + (stop - s.At)})
			}
			if stop < end {
				at = min(holes[0]+unit, end)
			} else {
				at = end
			}
		}
	}
	return out
}

// appendRange appends r to rs, joined to the last range when they touch.
func appendRange(rs []Range, r Range) []Range {
	if k := len(rs); k > 0 && rs[k-1].Hi == r.Lo {
		rs[k-1].Hi = r.Hi
		return rs
	}
	return append(rs, r)
}

// Dropped are the positions of G that no rank gets under Drop: the last
// Total mod World of C, or with a global batch the last partial step.
// Under Pad none is.
func (l Layout) Dropped(rem Remainder) []Range {
	t := l.Total()
	if rem == Pad || l.World < 1 || t == 0 {
		return nil
	}
	from := l.Share(0, rem) * uint64(l.World)
	if l.GlobalBatch > 0 {
		from = l.Steps(rem) * l.GlobalBatch
	}
	var out []Range
	for _, s := range l.span(l.starts(), from, t, false) {
		out = append(out, s.Range)
	}
	return out
}
