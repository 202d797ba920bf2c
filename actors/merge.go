package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// KindMerge is the stage that merges the lanes' items (Options.Lanes).
const KindMerge = "merge"

// mergeCell is what the merge stage persists: a link from each lane's last
// stage, the batches taken in from each and not yet merged, and its link to
// the double buffer. Batches leave in the deal stage's turn: the pass's
// item k was dealt to lane k mod K, and leaves that lane as one batch
// (lanes.go, docs/protocol.md "Lanes").
type mergeCell struct {
	cell
	ins      []inlet
	lanes    map[string]int // a lane's last stage -> its lane, for Resubscribe
	queues   [][]*messages.Batch
	queue    int // batches a lane may have queued here: its link's window
	out      outlet
	capacity int    // merged batches held unsent before merging pauses
	turn     uint64 // batches merged this pass: the next is lane turn mod K's
	skipped  uint64
	// dropLast, size: the lanes' batch stages keep the last, short batch,
	// so that every item leaves as one; the merge drops it.
	dropLast bool
	size     uint64
}

// lane is the lane whose link an epoch belongs to: lane l's epochs are
// l mod lanes (inlet.stride).
func (c *mergeCell) lane(epoch uint64) int { return int(epoch % uint64(len(c.ins))) }

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
	mc := &mergeCell{cell: cell{name: name, kind: KindMerge, pipe: p.pipe}, lanes: map[string]int{},
		ins: make([]inlet, len(lasts)), queues: make([][]*messages.Batch, len(lasts)), queue: opts.Window,
		capacity: opts.Capacity}
	if p.aligned > 0 {
		mc.dropLast, mc.size = p.dropLast, uint64(p.order.unit)
	}
	for l, last := range lasts {
		mc.lanes[last] = l
		mc.ins[l] = inlet{window: int64(mc.queue), epoch: uint64(l), stride: uint64(len(lasts))}
	}
	p.cells = append(p.cells, &mc.cell)
	return spawnable{name: name, cell: &mc.cell,
		lanes: func(ups []*actor.PID) {
			for l, up := range ups {
				mc.ins[l].pub = up
			}
		},
		producer: func(*actor.PID, []*actor.PID) actor.Actor { return &mergeActor{c: mc} }}
}

type mergeActor struct{ c *mergeCell }

func (a *mergeActor) Receive(ctx actor.Context) {
	c := a.c
	defer a.gauge()
	msg, send := c.receive(ctx)
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			for l := range c.ins {
				c.ins[l].reopen(send, a.room(l))
			}
			c.announce(send)
		}
		return
	case *messages.Subscribe:
		if err := a.onSubscribe(ctx, send, m); err != nil {
			a.fail(send, err)
			return
		}
	case *messages.Demand:
		if err := c.out.onDemand(m); err != nil {
			a.fail(send, err)
			return
		}
	case *messages.Cancel:
		a.onCancel(send, m)
		return
	case *messages.Resubscribe:
		if l, ok := c.lanes[m.Stage]; ok {
			c.ins[l].reopen(send, a.room(l))
		}
		return
	default:
		if !a.onLane(send, msg) {
			return
		}
	}
	// Merging pauses at Capacity unsent items, and what it sends frees
	// room: merge again until nothing more goes, since the items queued
	// here bring no message that would prompt it.
	for {
		if err := a.merge(); err != nil {
			a.fail(send, err)
			return
		}
		sent := c.out.sent
		c.out.flush(send)
		if c.out.sent == sent {
			break
		}
	}
	for l := range c.ins {
		c.ins[l].replenish(send, a.room(l), c.ins[l].next)
	}
}

// onLane takes what a lane sends: an item, its End or its Failure. It
// reports whether the message counted.
func (a *mergeActor) onLane(send func(*actor.PID, any), msg any) bool {
	c := a.c
	switch m := msg.(type) {
	case *messages.Batch:
		l := c.lane(m.Epoch)
		if !c.ins[l].admit(send, m.Epoch, m.Seq, a.room(l)) {
			return false
		}
		c.ins[l].commit()
		item := &messages.Batch{Pass: c.out.pass, Slots: m.Slots, Parts: m.Parts, Rows: m.Rows, Ids: m.Ids}
		keepPlace(item, m)
		c.queues[l] = append(c.queues[l], item)
	case *messages.End:
		l := c.lane(m.Epoch)
		if !c.ins[l].admitEnd(send, m, a.room(l)) {
			return false
		}
		c.ins[l].ended = true
		c.skipped = max(c.skipped, m.Skipped) // the deal stage told every lane the same
	case *messages.Failure:
		l := c.lane(m.Epoch)
		if !c.ins[l].current(m.Epoch) {
			return false
		}
		c.ins[l].ended = true
		c.out.fail = m
	default:
		return false
	}
	return true
}

// onSubscribe takes the double buffer's subscription: one for another pass
// starts it in every lane, forgetting what was queued of the last.
func (a *mergeActor) onSubscribe(ctx actor.Context, send func(*actor.PID, any), m *messages.Subscribe) error {
	c := a.c
	switch c.out.classify(m) {
	case staleSub:
		return nil
	case resumeSub:
		return c.out.subscribe(ctx.Sender(), m)
	}
	c.out.reset(m.Pass)
	for l, q := range c.queues {
		for _, b := range q {
			c.pipe.discard(b)
		}
		c.queues[l] = q[:0]
	}
	c.turn, c.skipped = 0, 0
	if err := c.out.subscribe(ctx.Sender(), m); err != nil {
		return err
	}
	for l := range c.ins {
		c.ins[l].subscribe(send, m.Pass, 0, a.room(l))
	}
	return nil
}

// onCancel closes the link to the double buffer, and the lanes' links.
func (a *mergeActor) onCancel(send func(*actor.PID, any), m *messages.Cancel) {
	c := a.c
	if !c.out.cancel(m) {
		return
	}
	for l := range c.ins {
		c.ins[l].cancel(send)
	}
}

// merge moves queued batches to the outlet in the deal stage's turn, while
// it has room. A lane that ended with its turn's batch missing ended the
// pass: nothing was dealt past it, so every other lane has ended, or will,
// with nothing more; once they have, the pass ends.
func (a *mergeActor) merge() error {
	c := a.c
	for c.out.fail == nil && c.out.end == nil && c.out.unsent() < c.capacity {
		l := int(c.turn % uint64(len(c.ins)))
		if q := c.queues[l]; len(q) > 0 {
			h := q[0]
			q[0] = nil
			c.queues[l] = q[1:]
			c.turn++
			if c.dropLast && h.Positions < c.size {
				c.pipe.discard(h) // the last, short batch (see mergeCell)
				continue
			}
			c.out.push(h)
			c.meter.items.Add(1)
			continue
		}
		if !c.ins[l].ended {
			return nil // wait for lane l
		}
		for k := range c.ins {
			if len(c.queues[k]) > 0 {
				return fmt.Errorf("%w: lane %d ended before item %d of the pass, and lane %d holds later ones", ErrProtocol, l, c.turn, k)
			}
		}
		if a.drained() {
			c.out.end = &messages.End{Pass: c.out.pass, Count: c.out.produced(), Skipped: c.skipped}
		}
		return nil
	}
	return nil
}

// drained says whether every lane ended its pass and nothing is queued.
func (a *mergeActor) drained() bool {
	for l := range a.c.ins {
		if !a.c.ins[l].ended || len(a.c.queues[l]) > 0 {
			return false
		}
	}
	return true
}

// room is how many more items lane l may send.
func (a *mergeActor) room(l int) int { return a.c.queue - len(a.c.queues[l]) }

func (a *mergeActor) gauge() {
	c := a.c
	held, demand := c.out.held(), int64(0)
	for l := range c.ins {
		held += len(c.queues[l])
		demand += c.ins[l].outstanding
	}
	c.meter.gauge(held, demand)
}

// fail ends the link to the double buffer with err.
func (a *mergeActor) fail(send func(*actor.PID, any), err error) {
	c := a.c
	c.pipe.record(c.name, err)
	c.out.fail = failure(c.name, "", -1, err)
	for l := range c.ins {
		c.ins[l].ended = true
	}
	c.out.flush(send)
}
