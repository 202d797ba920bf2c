package actors

import (
	"fmt"

	"github.com/actorfeed/actorfeed/readers/order"
)

// Lanes (Options.Lanes) spread the per-sample work of a pipeline over the
// cores. Each lane is a copy of the stages before the double buffer (file
// readers, open_files, the shuffle that assembles the order's windows, the
// batch stage and maps), and reads its own stretches of the rank's
// positions: stretch k (laneSpan positions) belongs to lane k mod Lanes. A
// merge stage takes the lanes' items back in position order, so the items
// the double buffer routes, and so every device's batches, are those of one
// lane: the order does not depend on Lanes.

// laneSpan is the positions of a lane's stretch, for windows of window
// positions (the order's span: order.Block unshuffled), items of unit
// positions and splits of about split records. It is a whole number of
// items and, where that is not far larger, of windows, so that no window
// is read by two lanes: a window is read whole to be permuted, whichever
// of its positions a lane delivers (when window and unit do not align,
// about four windows keep what a window cut by a stretch costs to a
// quarter). And it is at least eight splits, about 8 MiB of RecordIO
// chunks whatever the samples' size: a split that a stretch ends inside is
// read, checksummed and decoded by both lanes, and with stretches of a
// window (1,024 records) and 1 MiB chunks (1,300 Fashion-MNIST records)
// every chunk was, which cost a quarter more CPU than one lane.
func laneSpan(window, unit, split uint64) uint64 {
	window, unit = max(window, 1), max(unit, 1)
	base := lcm(window, unit)
	if base > 4*max(window, unit) {
		base = (4*window + unit - 1) / unit * unit
	}
	return base * max(1, (8*split+base-1)/base)
}

func lcm(a, b uint64) uint64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// segments are the positions of pass that lane delivers.
func (p *orderPlan) segments(pass uint32, lane int) []order.Segment {
	layout, done := p.layout(pass)
	segs := layout.Cut(p.shard.Rank, p.shard.Remainder, done)
	return order.Lanes(segs, lane, p.lanes, p.span)
}

// Lanes is how many lanes the pipeline has (Options.Lanes) and how many
// positions of the order each delivers in a row, its stretch (0 with one
// lane): the merge stage queues up to a stretch of each lane's items, and
// its link's window more (docs/protocol.md, "Lanes").
func (p *Pipeline) Lanes() (lanes, stretch int) {
	if p.order == nil || p.order.lanes <= 1 {
		return 1, 0
	}
	return p.order.lanes, int(p.order.span)
}

// laneOf is the lane that delivers rank position pos, and where its
// stretch ends.
func (p *orderPlan) laneOf(pos uint64) (lane int, end uint64) {
	k := pos / p.span
	return int(k % uint64(p.lanes)), (k + 1) * p.span
}

// checkLanes refuses lanes a chain cannot have: they need the order (Files,
// not in any order), and their stages are a shuffle right after the files,
// batch, map and xmap stages, up to the double buffer.
func checkLanes(stages []Stage, lanes int) error {
	if lanes <= 1 {
		return nil
	}
	if f, ok := stages[0].(Files); !ok || f.AnyOrder {
		return fmt.Errorf("%w: %d lanes need a Files source in the order (not AnyOrder)", ErrBadSpec, lanes)
	}
	for i, s := range stages[1:] {
		switch s.(type) {
		case Batch, Map, XMap, DoubleBuffer:
		case Shuffle:
			if i == 0 {
				continue
			}
			return fmt.Errorf("%w: stage %d (%s): lanes take a shuffle only right after the files", ErrBadSpec, i+1, s.kind())
		default:
			return fmt.Errorf("%w: stage %d (%s): a pipeline with lanes has no %s stage", ErrBadSpec, i+1, s.kind(), s.kind())
		}
	}
	return nil
}

// laneStages is how many stages of the chain each lane copies: every stage
// before the double buffer.
func laneStages(stages []Stage) int {
	if _, ok := stages[len(stages)-1].(DoubleBuffer); ok {
		return len(stages) - 1
	}
	return len(stages)
}

// laneName names stage name of lane l.
func laneName(l int, name string) string { return fmt.Sprintf("lane-%d/%s", l, name) }
