package protocol

import "github.com/actorfeed/actorfeed/readers/order"

// Plan is the order as its assembly (Units, Windows) reads it: the
// order function, the rank's share of each pass, and where pass 0 starts.
type Plan struct {
	Ord       *order.Order
	Unit      int // positions per item: the batch size, or GroupSize
	Rank      int
	World     int // at least 1
	Remainder order.Remainder
	// GlobalBatch deals each epoch in global steps of this many positions
	// (order.Layout.GlobalBatch); 0 deals contiguous shards.
	GlobalBatch uint64
	First       int          // the epoch of pass 0
	FirstPlan   order.Layout // pass 0's layout
	FirstDone   uint64       // positions of pass 0's shard already delivered
	FirstSkip   []uint64     // where items delivered past FirstDone start on the line (see Line)
	Lanes       int          // actors.Options.Lanes: items of one batch each
}

// Skip are the first positions of the items of pass that were delivered
// already.
func (p *Plan) Skip(pass uint32) []uint64 {
	lo, hi := p.Line(pass, 0), p.Line(pass+1, 0)
	var out []uint64
	for _, l := range p.FirstSkip {
		if l >= lo && l < hi {
			out = append(out, l-lo)
		}
	}
	return out
}

// The line is the rank's positions of the pipeline's passes one after the
// other: pass 0's from its first position (a resumed pass's included),
// then each later pass's share. Commits are tracked on it, so that a state
// taken while devices commit items of two epochs of one multi-pass pass
// says which of both were committed.

// Line is position pos of pass on the line.
func (p *Plan) Line(pass uint32, pos uint64) uint64 {
	if pass == 0 {
		return pos
	}
	return p.share(0) + uint64(pass-1)*p.share(1) + pos
}

// OnLine is the pass and position of line position l; a pass's end is the
// next one's start.
func (p *Plan) OnLine(l uint64) (uint32, uint64) {
	first, full := p.share(0), p.share(1)
	if l < first || full == 0 {
		return 0, l
	}
	k := (l - first) / full
	return uint32(1 + k), l - first - k*full
}

// share is the rank's positions of pass, padding included.
func (p *Plan) share(pass uint32) uint64 {
	layout, _ := p.Layout(pass)
	return layout.Share(p.Rank, p.Remainder)
}

func (p *Plan) Epoch(pass uint32) int { return p.First + int(pass) }

// Layout is pass's layout, and the positions of it already delivered.
func (p *Plan) Layout(pass uint32) (order.Layout, uint64) {
	if pass == 0 {
		return p.FirstPlan, p.FirstDone
	}
	return order.Full(p.Ord.Len(), p.World, p.GlobalBatch), 0
}

// segments are the positions of pass the rank delivers, walked one
// segment at a time.
func (p *Plan) segments(pass uint32) *order.Walk {
	layout, done := p.Layout(pass)
	return layout.Walk(p.Rank, p.Remainder, done)
}
