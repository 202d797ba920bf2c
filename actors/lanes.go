package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
)

// Kinds of the stages that run the lanes (Options.Lanes).
const (
	// KindDeal is the stage that deals the order's items to the lanes.
	KindDeal = "deal"
	// KindMerge is the stage that merges the lanes' items.
	KindMerge = "merge"
)

// Lanes (Options.Lanes) spread the per-batch work of a pipeline (the batch
// stage's copy of every sample into its batch, and the maps) over the
// cores. The file readers, open_files and the shuffle that assembles the
// order's windows run once, as without lanes: reading is spread over the
// cores by the readers (Files.Threads), and the assembly only moves
// references. A deal stage hands the assembled items, one batch each, to K
// copies of the stages after them up to the double buffer, item k to lane
// k mod K, and a merge stage takes the lanes' batches back in the same
// turn. Every item leaves its lane as one batch, so the merged batches are
// those of one lane, and the order does not depend on Lanes.
//
// Memory grows with K by what a lane's stages hold and a link's window at
// each end of it, never by a stretch of the order read ahead: the lanes
// take turns item by item, so none runs further ahead of the others than
// its links let it (docs/protocol.md "Lanes", docs/memory.md).

// planDeal plans the deal stage before lane stage first: a fan-out of
// one outlet per lane, a link's window each, which deals item k to lane
// k mod K. It does not read the next pass ahead: the double buffer after
// the merge does, through the lanes.
func (p *Pipeline) planDeal(first int) spawnable {
	name := fmt.Sprintf("%d-%s", first, KindDeal)
	lanes, window := p.pipe.opts.Lanes, p.pipe.opts.Window
	c := &cell{name: name, kind: KindDeal, pipe: p.pipe}
	fc := &protocol.FanoutMachine{Name: name, Outs: make([]protocol.Outlet, lanes), Window: window, Deals: true, Effects: stageEffects(c)}
	fc.In.Window = int64(lanes * window)
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c, deal: true, producer: func(up *actor.PID, _ []*actor.PID) actor.Actor {
		fc.In.Pub = up
		return &machineActor{c: c, m: fc}
	}}
}

// Lanes is how many lanes the pipeline runs (Options.Lanes, or 1 where the
// chain has no stage to copy after the order's assembly).
func (p *Pipeline) Lanes() int { return p.pipe.opts.Lanes }

// checkLanes refuses lanes a chain cannot have: they need the order (Files,
// not in any order), and their stages are a shuffle right after the files,
// one batch stage, and map and xmap stages, up to the double buffer. Every
// stage a lane copies must make one item of each it takes in.
func checkLanes(stages []Stage, lanes int) error {
	if lanes <= 1 {
		return nil
	}
	if f, ok := stages[0].(Files); !ok || f.AnyOrder {
		return fmt.Errorf("%w: %d lanes need a Files source in the order (not AnyOrder)", ErrBadSpec, lanes)
	}
	batches := 0
	for i, s := range stages[1:] {
		switch s.(type) {
		case Map, XMap, DoubleBuffer:
		case Batch:
			if batches++; batches > 1 {
				return fmt.Errorf("%w: stage %d (%s): a pipeline with lanes has one batch stage", ErrBadSpec, i+1, s.kind())
			}
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

// laneStages is where the lanes' stages end: at the double buffer.
func laneStages(stages []Stage) int {
	if _, ok := stages[len(stages)-1].(DoubleBuffer); ok {
		return len(stages) - 1
	}
	return len(stages)
}

// laneFirst is the first stage the lanes copy: the one after the order's
// assembly (the shuffle right after the files, or the files themselves).
func laneFirst(stages []Stage) int {
	if _, ok := stageAt[Shuffle](stages, 1); ok {
		return 2
	}
	return 1
}

// laneName names stage name of lane l.
func laneName(l int, name string) string { return fmt.Sprintf("lane-%d/%s", l, name) }

// mergeHolds is how many batches the merge stage may hold: queued from the
// lanes and unsent.
func (p *Pipeline) mergeHolds() int {
	return p.pipe.opts.Lanes*p.pipe.opts.Window + p.pipe.opts.Capacity
}

// planMerge plans the merge stage after the lanes' first n stages; lasts
// names each lane's last stage.
func (p *Pipeline) planMerge(stages []Stage, n int, lasts []string) spawnable {
	name := fmt.Sprintf("%d-%s", n, KindMerge)
	opts := p.pipe.opts
	c := &cell{name: name, kind: KindMerge, pipe: p.pipe}
	m := protocol.NewMergeMachine(name, lasts, opts.Window, opts.Capacity)
	m.Effects = stageEffects(c)
	if p.aligned > 0 {
		m.DropLast, m.Size = p.dropLast, uint64(p.order.Unit)
	}
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c,
		lanes: func(ups []*actor.PID) {
			for l, up := range ups {
				m.Ins[l].Pub = up
			}
		},
		producer: func(*actor.PID, []*actor.PID) actor.Actor { return &machineActor{c: c, m: m} }}
}
