package order

import "fmt"

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
// shards, shard r for rank r. An epoch starts from Full; Rest re-deals what
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

// Lanes is lane's part of segs when lanes lanes share a rank's sequence:
// the rank's positions are cut into stretches of span positions, and
// stretch k belongs to lane k mod lanes. Each lane reads the windows its
// positions are in; a span that is a multiple of the window (and starts
// where one does) keeps lanes from reading a window twice.
func Lanes(segs []Segment, lane, lanes int, span uint64) []Segment {
	if lanes <= 1 {
		return segs
	}
	var out []Segment
	for _, sg := range segs {
		for at := sg.At; at < sg.At+sg.Len(); {
			k := at / span
			end := min((k+1)*span, sg.At+sg.Len())
			if int(k%uint64(lanes)) == lane {
				lo := sg.Lo + (at - sg.At)
				out = append(out, Segment{Range: Range{lo, lo + (end - at)}, Pad: sg.Pad, At: at})
			}
			at = end
		}
	}
	return out
}

// span maps positions [a, b) of the concatenated ranges (b <= Total) to
// ranges of G.
func (l Layout) span(a, b uint64, pad bool) []Segment {
	var out []Segment
	var at uint64
	for _, r := range l.Ranges {
		if at >= b {
			break
		}
		if x, y := max(a, at), min(b, at+r.Len()); x < y {
			out = append(out, Segment{Range: Range{r.Lo + (x - at), r.Lo + (y - at)}, Pad: pad})
		}
		at += r.Len()
	}
	return out
}

// Rest is the layout of the positions not yet delivered when every rank
// has delivered done positions of its shard, dealt among world ranks.
// Padding is not carried over (it repeated positions dealt to a rank
// already), and under Drop neither is the dropped remainder.
func (l Layout) Rest(rem Remainder, done uint64, world int) Layout {
	out := Layout{World: world}
	for r := range l.World {
		for _, s := range l.Cut(r, rem, done) {
			if s.Pad {
				continue
			}
			if k := len(out.Ranges); k > 0 && out.Ranges[k-1].Hi == s.Lo {
				out.Ranges[k-1].Hi = s.Hi
			} else {
				out.Ranges = append(out.Ranges, s.Range)
			}
		}
	}
	return out
}
