package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// logic is what a decorator stage does to the items passing through it. Its
// state lives in the stage's cell. take and finish must not leave the state
// half changed when they return an error; they may panic only before they
// change it (a user function, say), so a restart resumes from a consistent
// state.
type logic interface {
	// start begins the downstream pass, forgetting all state.
	start(pass uint32)
	// upstreamPass is the pass to ask the upstream stage for when the
	// downstream pass starts.
	upstreamPass(pass uint32) uint32
	// take incorporates one input item and returns the items it completes.
	take(b *messages.Batch) ([]*messages.Batch, error)
	// finish is called when the upstream pass ended. It returns the last
	// items and, for a multi-pass stage, the upstream pass to go on with.
	finish() (out []*messages.Batch, next uint32, more bool, err error)
}

// dropper is a logic that drops samples of the items it takes (a map
// under the skip policy, bad_samples.go): takeDropped is how many since it
// was last asked.
type dropper interface {
	takeDropped() uint64
}

// relay is what every stage between one upstream and one downstream stage
// keeps of its two links.
type relay struct {
	name     string // the stage's, for its failures
	in       inlet
	out      outlet
	capacity int    // produced items held unsent before intake pauses
	skipped  uint64 // corrupt records skipped upstream in this pass, and samples a map dropped
}

// linkResult says what onLink did with a message.
type linkResult int

const (
	notLink linkResult = iota // not a link message: the stage handles it
	handled                   // handled, nothing more to do
	flushed                   // handled: flush the outlet and top up demand
)

// onLink handles the link messages every relaying stage treats alike: the
// subscriber's (outlet.step; begin starts a new pass and returns the
// upstream pass to ask for), Resubscribe and the upstream's Failure. An
// error breaks the protocol: the relay has failed with it.
func (r *relay) onLink(box *outbox, from *actor.PID, msg any, room int, begin func(pass uint32) uint32) (linkResult, error) {
	ev, err := r.out.step(from, msg)
	if err != nil {
		r.fail(box, err)
		return handled, err
	}
	switch ev {
	case outletIgnored:
		return handled, nil
	case outletFlush:
		return flushed, nil
	case outletBegin:
		r.skipped = 0
		r.in.subscribe(box, begin(r.out.pass), 0, room)
		return flushed, nil
	case outletCancel:
		r.in.cancel(box)
		return handled, nil
	}
	switch m := msg.(type) {
	case *messages.Resubscribe:
		r.in.reopen(box, room)
		return handled, nil
	case *messages.Failure:
		if !r.in.current(m.Epoch) {
			return handled, nil
		}
		r.in.ended = true
		r.out.fail = m
		return flushed, nil
	}
	return notLink, nil
}

// fail ends the downstream link with err; the pipeline sees it at its sink.
func (r *relay) fail(box *outbox, err error) {
	r.out.fail = failure(r.name, "", -1, err)
	r.in.ended = true
	r.out.flush(box)
}

// relayMachine is the protocol of a decorator stage (shuffle, batch, map,
// multi-pass, the order's windows): its two links, the credit between
// them, a new pass on a fresh subscription (Reset and ReInit), the
// upstream passes of a multi-pass stage, and what a restart asks again. A
// logic says what the stage does to the items. It is a state machine run
// by machineActor: no actor, goroutine, channel or clock inside.
type relayMachine struct {
	relay
	logic logic
	fx    effects
}

func (m *relayMachine) restarted(box *outbox) {
	// The message that failed was dropped: it may have been an item (ask
	// again from the first one not taken in) or demand (the runner asks
	// the subscriber to open the link again).
	m.in.reopen(box, m.room())
}

func (m *relayMachine) load() (int, int64) { return m.out.held(), m.in.outstanding }

func (m *relayMachine) step(box *outbox, from *actor.PID, msg any) error {
	begin := func(pass uint32) uint32 {
		m.logic.start(pass)
		return m.logic.upstreamPass(pass)
	}
	res, err := m.onLink(box, from, msg, m.room(), begin)
	if err != nil {
		return err
	}
	if res == notLink {
		if ok, err := m.onItem(box, msg); !ok || err != nil {
			return err
		}
	} else if res != flushed {
		return nil
	}
	m.out.flush(box)
	m.in.replenish(box, m.room(), m.in.next)
	return nil
}

// onItem handles an item or the upstream's End; false when there is nothing
// to flush.
func (m *relayMachine) onItem(box *outbox, msg any) (bool, error) {
	switch b := msg.(type) {
	case *messages.Batch:
		if !m.in.admit(box, b.Epoch, b.Seq, m.room()) {
			return false, nil
		}
		out, err := m.logic.take(b)
		m.in.commit()
		if err != nil {
			m.fail(box, err)
			return false, err
		}
		if d, ok := m.logic.(dropper); ok {
			m.skipped += d.takeDropped() // with the items that lack them
		}
		m.push(out)
	case *messages.End:
		if !m.in.admitEnd(box, b, m.room()) {
			return false, nil
		}
		m.skipped += b.Skipped
		out, next, more, err := m.logic.finish()
		if err != nil {
			m.fail(box, err)
			return false, err
		}
		m.push(out)
		if more {
			m.in.subscribe(box, next, 0, m.room())
		} else {
			m.in.ended = true
			m.out.end = &messages.End{Pass: m.out.pass, Count: m.out.produced(), Skipped: m.skipped}
		}
	default:
		return false, nil
	}
	return true, nil
}

func (m *relayMachine) push(out []*messages.Batch) {
	for _, b := range out {
		m.out.push(b)
		m.fx.made(b)
	}
}

// room is how many more input items the stage should ask for.
func (m *relayMachine) room() int { return m.capacity - m.out.unsent() }

// failure builds the wire form of a stage error.
func failure(stage, file string, offset int64, err error) *messages.Failure {
	return &messages.Failure{Stage: stage, File: file, Offset: offset, Class: Classify(err), Cause: fmt.Sprint(err)}
}
