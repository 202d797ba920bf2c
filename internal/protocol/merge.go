package protocol

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// MergeMachine is the merge stage's protocol: a link from each lane's last
// stage, the batches taken in from each and not yet merged, and its link
// to the double buffer. Batches leave in the deal stage's turn: the pass's
// item k was dealt to lane k mod K, and leaves that lane as one batch
// (actors/lanes.go, docs/protocol.md "Lanes"). actors.machineActor runs it.
type MergeMachine struct {
	name     string
	Ins      []Inlet
	lanes    map[string]int // a lane's last stage -> its lane, for Resubscribe
	queues   [][]*messages.Batch
	queue    int // batches a lane may have queued here: its link's window
	out      Outlet
	capacity int      // merged batches held unsent before merging pauses
	turn     uint64   // batches merged this pass: the next is lane turn mod K's
	skipped  []uint64 // each lane's End's count; a replayed End counts once
	// DropLast, size: the lanes' batch stages keep the last, short batch,
	// so that every item leaves as one; the merge drops it.
	DropLast bool
	Size     uint64
	Effects  Effects
}

// NewMergeMachine makes the merge of the lanes whose last stages lasts
// names, each queueing up to queue batches here.
func NewMergeMachine(name string, lasts []string, queue, capacity int) *MergeMachine {
	m := &MergeMachine{name: name, lanes: map[string]int{}, Ins: make([]Inlet, len(lasts)),
		queues: make([][]*messages.Batch, len(lasts)), queue: queue, capacity: capacity, skipped: make([]uint64, len(lasts))}
	for l, last := range lasts {
		m.lanes[last] = l
		m.Ins[l] = Inlet{Window: int64(queue), epoch: uint64(l), stride: uint64(len(lasts))}
	}
	return m
}

// lane is the lane whose link an epoch belongs to: lane l's epochs are
// l mod lanes (inlet.stride).
func (m *MergeMachine) lane(epoch uint64) int { return int(epoch % uint64(len(m.Ins))) }

func (m *MergeMachine) Restarted(box *Outbox) {
	for l := range m.Ins {
		m.Ins[l].Reopen(box, m.room(l))
	}
}

func (m *MergeMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	ev, err := m.out.Step(from, msg)
	switch {
	case err != nil:
		m.fail(box, err)
		return err
	case ev == outletIgnored:
		return nil
	case ev == OutletBegin:
		m.begin(box)
	case ev == OutletCancel:
		for l := range m.Ins {
			m.Ins[l].cancel(box)
		}
		return nil
	case ev == notOutlet:
		if r, ok := msg.(*messages.Resubscribe); ok {
			if l, ok := m.lanes[r.Stage]; ok {
				m.Ins[l].Reopen(box, m.room(l))
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
		sent := m.out.Sent
		m.out.Flush(box)
		if m.out.Sent == sent {
			break
		}
	}
	for l := range m.Ins {
		m.Ins[l].Replenish(box, m.room(l), m.Ins[l].next)
	}
	return nil
}

// onLane takes what a lane sends: an item, its End or its Failure. It
// reports whether the message counted.
func (m *MergeMachine) onLane(box *Outbox, msg any) bool {
	switch b := msg.(type) {
	case *messages.Batch:
		l := m.lane(b.Epoch)
		if !m.Ins[l].Admit(box, b.Epoch, b.Seq, m.room(l)) {
			return false
		}
		m.Ins[l].Commit()
		item := &messages.Batch{Pass: m.out.Pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}
		KeepPlace(item, b)
		m.queues[l] = append(m.queues[l], item)
	case *messages.End:
		l := m.lane(b.Epoch)
		if !m.Ins[l].AdmitEnd(box, b, m.room(l)) {
			return false
		}
		m.Ins[l].Ended = true
		m.skipped[l] = b.Skipped // the deal stage's count in lane 0, each lane's maps' own
	case *messages.Failure:
		l := m.lane(b.Epoch)
		if !m.Ins[l].Current(b.Epoch) {
			return false
		}
		m.Ins[l].Ended = true
		m.out.Fail = b
	default:
		return false
	}
	return true
}

// begin starts a new pass in every lane, forgetting what was queued of the
// last.
func (m *MergeMachine) begin(box *Outbox) {
	for l, q := range m.queues {
		for _, b := range q {
			m.Effects.drop(b)
		}
		m.queues[l] = q[:0]
	}
	m.turn = 0
	clear(m.skipped)
	for l := range m.Ins {
		m.Ins[l].Subscribe(box, m.out.Pass, 0, m.room(l))
	}
}

// merge moves queued batches to the outlet in the deal stage's turn, while
// it has room. A lane that ended with its turn's batch missing ended the
// pass: nothing was dealt past it, so every other lane has ended, or will,
// with nothing more; once they have, the pass ends.
func (m *MergeMachine) merge() error {
	for m.out.Fail == nil && m.out.End == nil && m.out.Unsent() < m.capacity {
		l := int(m.turn % uint64(len(m.Ins)))
		if q := m.queues[l]; len(q) > 0 {
			h := q[0]
			q[0] = nil
			m.queues[l] = q[1:]
			m.turn++
			if m.DropLast && h.Positions < m.Size {
				m.Effects.drop(h) // the last, short batch (see mergeCell)
				continue
			}
			m.out.Push(h)
			m.Effects.made(h)
			continue
		}
		if !m.Ins[l].Ended {
			return nil // wait for lane l
		}
		for k := range m.Ins {
			if len(m.queues[k]) > 0 {
				return fmt.Errorf("%w: lane %d ended before item %d of the pass, and lane %d holds later ones", ErrProtocol, l, m.turn, k)
			}
		}
		if m.drained() {
			var skipped uint64
			for _, n := range m.skipped {
				skipped += n
			}
			m.out.End = &messages.End{Pass: m.out.Pass, Count: m.out.Produced(), Skipped: skipped}
		}
		return nil
	}
	return nil
}

// drained says whether every lane ended its pass and nothing is queued.
func (m *MergeMachine) drained() bool {
	for l := range m.Ins {
		if !m.Ins[l].Ended || len(m.queues[l]) > 0 {
			return false
		}
	}
	return true
}

// room is how many more items lane l may send.
func (m *MergeMachine) room(l int) int { return m.queue - len(m.queues[l]) }

func (m *MergeMachine) Load() (int, int64) {
	held, demand := m.out.Held(), int64(0)
	for l := range m.Ins {
		held += len(m.queues[l])
		demand += m.Ins[l].Outstanding
	}
	return held, demand
}

// fail ends the link to the double buffer with err.
func (m *MergeMachine) fail(box *Outbox, err error) {
	m.out.Fail = Failure(m.name, "", -1, err)
	for l := range m.Ins {
		m.Ins[l].Ended = true
	}
	m.out.Flush(box)
}
