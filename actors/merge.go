package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// KindMerge is the stage that merges the lanes' items (Options.Lanes).
const KindMerge = "merge"

// mergeMachine is the merge stage's protocol: a link from each lane's last
// stage, the batches taken in from each and not yet merged, and its link
// to the double buffer. Batches leave in the deal stage's turn: the pass's
// item k was dealt to lane k mod K, and leaves that lane as one batch
// (lanes.go, docs/protocol.md "Lanes"). machineActor runs it.
type mergeMachine struct {
	name     string
	ins      []inlet
	lanes    map[string]int // a lane's last stage -> its lane, for Resubscribe
	queues   [][]*messages.Batch
	queue    int // batches a lane may have queued here: its link's window
	out      outlet
	capacity int      // merged batches held unsent before merging pauses
	turn     uint64   // batches merged this pass: the next is lane turn mod K's
	skipped  []uint64 // each lane's End's count; a replayed End counts once
	// dropLast, size: the lanes' batch stages keep the last, short batch,
	// so that every item leaves as one; the merge drops it.
	dropLast bool
	size     uint64
	fx       effects
}

// newMergeMachine makes the merge of the lanes whose last stages lasts
// names, each queueing up to queue batches here.
func newMergeMachine(name string, lasts []string, queue, capacity int) *mergeMachine {
	m := &mergeMachine{name: name, lanes: map[string]int{}, ins: make([]inlet, len(lasts)),
		queues: make([][]*messages.Batch, len(lasts)), queue: queue, capacity: capacity, skipped: make([]uint64, len(lasts))}
	for l, last := range lasts {
		m.lanes[last] = l
		m.ins[l] = inlet{window: int64(queue), epoch: uint64(l), stride: uint64(len(lasts))}
	}
	return m
}

// lane is the lane whose link an epoch belongs to: lane l's epochs are
// l mod lanes (inlet.stride).
func (m *mergeMachine) lane(epoch uint64) int { return int(epoch % uint64(len(m.ins))) }

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
	m := newMergeMachine(name, lasts, opts.Window, opts.Capacity)
	m.fx = stageEffects(c)
	if p.aligned > 0 {
		m.dropLast, m.size = p.dropLast, uint64(p.order.unit)
	}
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c,
		lanes: func(ups []*actor.PID) {
			for l, up := range ups {
				m.ins[l].pub = up
			}
		},
		producer: func(*actor.PID, []*actor.PID) actor.Actor { return &machineActor{c: c, m: m} }}
}

func (m *mergeMachine) restarted(box *outbox) {
	for l := range m.ins {
		m.ins[l].reopen(box, m.room(l))
	}
}

func (m *mergeMachine) step(box *outbox, from *actor.PID, msg any) error {
	ev, err := m.out.step(from, msg)
	switch {
	case err != nil:
		m.fail(box, err)
		return err
	case ev == outletIgnored:
		return nil
	case ev == outletBegin:
		m.begin(box)
	case ev == outletCancel:
		for l := range m.ins {
			m.ins[l].cancel(box)
		}
		return nil
	case ev == notOutlet:
		if r, ok := msg.(*messages.Resubscribe); ok {
			if l, ok := m.lanes[r.Stage]; ok {
				m.ins[l].reopen(box, m.room(l))
			}
			return nil
		}
		if !m.onLane(box, msg) {
			return nil
		}
	}
	// Merging pauses at Capacity unsent items, and what it sends frees
	// room: merge again until nothing more goes, since the items queued
	// here bring no message that would prompt it.
	for {
		if err := m.merge(); err != nil {
			m.fail(box, err)
			return err
		}
		sent := m.out.sent
		m.out.flush(box)
		if m.out.sent == sent {
			break
		}
	}
	for l := range m.ins {
		m.ins[l].replenish(box, m.room(l), m.ins[l].next)
	}
	return nil
}

// onLane takes what a lane sends: an item, its End or its Failure. It
// reports whether the message counted.
func (m *mergeMachine) onLane(box *outbox, msg any) bool {
	switch b := msg.(type) {
	case *messages.Batch:
		l := m.lane(b.Epoch)
		if !m.ins[l].admit(box, b.Epoch, b.Seq, m.room(l)) {
			return false
		}
		m.ins[l].commit()
		item := &messages.Batch{Pass: m.out.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}
		keepPlace(item, b)
		m.queues[l] = append(m.queues[l], item)
	case *messages.End:
		l := m.lane(b.Epoch)
		if !m.ins[l].admitEnd(box, b, m.room(l)) {
			return false
		}
		m.ins[l].ended = true
		m.skipped[l] = b.Skipped // the deal stage's count in lane 0, each lane's maps' own
	case *messages.Failure:
		l := m.lane(b.Epoch)
		if !m.ins[l].current(b.Epoch) {
			return false
		}
		m.ins[l].ended = true
		m.out.fail = b
	default:
		return false
	}
	return true
}

// begin starts a new pass in every lane, forgetting what was queued of the
// last.
func (m *mergeMachine) begin(box *outbox) {
	for l, q := range m.queues {
		for _, b := range q {
			m.fx.drop(b)
		}
		m.queues[l] = q[:0]
	}
	m.turn = 0
	clear(m.skipped)
	for l := range m.ins {
		m.ins[l].subscribe(box, m.out.pass, 0, m.room(l))
	}
}

// merge moves queued batches to the outlet in the deal stage's turn, while
// it has room. A lane that ended with its turn's batch missing ended the
// pass: nothing was dealt past it, so every other lane has ended, or will,
// with nothing more; once they have, the pass ends.
func (m *mergeMachine) merge() error {
	for m.out.fail == nil && m.out.end == nil && m.out.unsent() < m.capacity {
		l := int(m.turn % uint64(len(m.ins)))
		if q := m.queues[l]; len(q) > 0 {
			h := q[0]
			q[0] = nil
			m.queues[l] = q[1:]
			m.turn++
			if m.dropLast && h.Positions < m.size {
				m.fx.drop(h) // the last, short batch (see mergeCell)
				continue
			}
			m.out.push(h)
			m.fx.made(h)
			continue
		}
		if !m.ins[l].ended {
			return nil // wait for lane l
		}
		for k := range m.ins {
			if len(m.queues[k]) > 0 {
				return fmt.Errorf("%w: lane %d ended before item %d of the pass, and lane %d holds later ones", ErrProtocol, l, m.turn, k)
			}
		}
		if m.drained() {
			var skipped uint64
			for _, n := range m.skipped {
				skipped += n
			}
			m.out.end = &messages.End{Pass: m.out.pass, Count: m.out.produced(), Skipped: skipped}
		}
		return nil
	}
	return nil
}

// drained says whether every lane ended its pass and nothing is queued.
func (m *mergeMachine) drained() bool {
	for l := range m.ins {
		if !m.ins[l].ended || len(m.queues[l]) > 0 {
			return false
		}
	}
	return true
}

// room is how many more items lane l may send.
func (m *mergeMachine) room(l int) int { return m.queue - len(m.queues[l]) }

func (m *mergeMachine) load() (int, int64) {
	held, demand := m.out.held(), int64(0)
	for l := range m.ins {
		held += len(m.queues[l])
		demand += m.ins[l].outstanding
	}
	return held, demand
}

// fail ends the link to the double buffer with err.
func (m *mergeMachine) fail(box *outbox, err error) {
	m.out.fail = failure(m.name, "", -1, err)
	for l := range m.ins {
		m.ins[l].ended = true
	}
	m.out.flush(box)
}
