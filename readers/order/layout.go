package order

import (
	"fmt"
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

// Layout is how the positions of an epoch still to be delivered are dealt:
// Ranges, in order, are concatenated and cut into World equal contiguous
// shards, shard r for rank r. An epoch starts from Full; Regroup re-deals what
// is left part way through, to another number of ranks.
type Layout struct {
	World  int     `json:"world"`
	Ranges []Range `json:"ranges"`
}

// Full is the layout of a whole epoch of n positions among world ranks.
func Full(n uint64, world int) Layout {
	l := Layout{World: world}
	if n > 0 {
		l.Ranges = []Range{{0, n}}
	}
	return l
}

// Check reports a layout that cannot be dealt: no ranks, or ranges that are
// empty, overlap or exceed n positions.
func (l Layout) Check(n uint64) error {
	if l.World < 1 {
		return fmt.Errorf("%w: world size %d", ErrBadOrder, l.World)
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

// Share is the number of positions each rank gets, padding included.
func (l Layout) Share(rem Remainder) uint64 {
	t, w := l.Total(), uint64(l.World)
	if rem == Pad {
		return (t + w - 1) / w
	}
	return t / w
}

// Cut is rank's shard from its from-th position on: runs of G positions in
// the order the rank delivers them.
func (l Layout) Cut(rank int, rem Remainder, from uint64) []Segment {
	t, n := l.Total(), l.Share(rem)
	if t == 0 || from >= n {
		return nil
	}
	base := uint64(rank) * n
	lo, hi := base+from, base+n
	var out []Segment
	for lo < hi {
		q, pad := lo, false
		end := hi
		if q >= t { // padding repeats the first positions dealt
			q, pad = (q-t)%t, true
			end = lo + min(hi-lo, t-q)
		} else {
			end = min(hi, t)
		}
		at := lo - base
		for _, sg := range l.span(q, q+(end-lo), pad) {
			sg.At, at = at, at+sg.Len()
			out = append(out, sg)
		}
		lo = end
	}
	return out
}

// span maps positions [a, b) of the concatenated ranges (b <= Total) to
// ranges of G. It finds the range holding a by bisection, so that cutting
// every rank's shard of a layout of many ranges costs ranks x log(ranges),
// not ranks x ranges.
func (l Layout) span(a, b uint64, pad bool) []Segment {
	pre := l.starts()
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

// starts are the positions, in the concatenated ranges, where each range
// starts.
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
// CheckProgress), dealt among world ranks: every position that no rank
// delivered, once, whatever step each rank stopped at. Padding is not
// carried over (it repeated positions dealt to a rank already), and under
// Drop neither is the dropped remainder. Adjacent ranges are joined, so the
// result has at most len(l.Ranges) + l.World + the items in Beyond ranges,
// whatever the number of positions.
func (l Layout) Regroup(rem Remainder, unit uint64, progress []Progress, world int) Layout {
	out := Layout{World: world}
	for r := range l.World {
		holes := progress[r].Beyond // sorted: each hides [b, b+unit)
		for _, s := range l.Cut(r, rem, progress[r].Done) {
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
					out.Ranges = appendRange(out.Ranges, Range{s.Lo + (at - s.At), s.Lo + (stop - s.At)})
				}
				if stop < end {
					at = min(holes[0]+unit, end)
				} else {
					at = end
				}
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
// Total mod World of the concatenated ranges. Under Pad none is.
func (l Layout) Dropped(rem Remainder) []Range {
	t := l.Total()
	if rem == Pad || l.World < 1 || t == 0 {
		return nil
	}
	var out []Range
	for _, s := range l.span(l.Share(rem)*uint64(l.World), t, false) {
		out = append(out, s.Range)
	}
	return out
}
