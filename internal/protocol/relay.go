package protocol

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/supervisor"
)

// Logic is what a decorator stage does to the items passing through it. Its
// state lives in the stage's cell. Take and Finish must not leave the state
// half changed when they return an error; they may panic only before they
// change it (a user function, say), so a restart resumes from a consistent
// state.
type Logic interface {
	// Start begins the downstream pass, forgetting all state.
	Start(pass uint32)
	// UpstreamPass is the pass to ask the upstream stage for when the
	// downstream pass starts.
	UpstreamPass(pass uint32) uint32
	// Take incorporates one input item and returns the items it completes.
	Take(b *messages.Batch) ([]*messages.Batch, error)
	// Finish is called when the upstream pass ended. It returns the last
	// items and, for a multi-pass stage, the upstream pass to go on with.
	Finish() (out []*messages.Batch, next uint32, more bool, err error)
}

// Dropper is a logic that drops samples of the items it takes (a map
// under the skip policy, actors/bad_samples.go): TakeDropped is how many since it
// was last asked.
type Dropper interface {
	TakeDropped() uint64
}

// Relay is what every stage between one upstream and one downstream stage
// keeps of its two links.
type Relay struct {
	Name     string // the stage's, for its failures
	In       Inlet
	Out      Outlet
	Capacity int    // produced items held unsent before intake pauses
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
// subscriber's (Outlet.Step; begin starts a new pass and returns the
// upstream pass to ask for), Resubscribe and the upstream's Failure. An
// error breaks the protocol: the relay has failed with it.
func (r *Relay) onLink(box *Outbox, from *actor.PID, msg any, room int, begin func(pass uint32) uint32) (linkResult, error) {
	ev, err := r.Out.Step(from, msg)
	if err != nil {
		r.fail(box, err)
		return handled, err
	}
	switch ev {
	case outletIgnored:
		return handled, nil
	case outletFlush:
		return flushed, nil
	case OutletBegin:
		r.skipped = 0
		r.In.Subscribe(box, begin(r.Out.Pass), 0, room)
		return flushed, nil
	case OutletCancel:
		r.In.cancel(box)
		return handled, nil
	}
	switch m := msg.(type) {
	case *messages.Resubscribe:
		r.In.Reopen(box, room)
		return handled, nil
	case *messages.Failure:
		if !r.In.Current(m.Epoch) {
			return handled, nil
		}
		r.In.Ended = true
		r.Out.Fail = m
		return flushed, nil
	}
	return notLink, nil
}

// fail ends the downstream link with err; the pipeline sees it at its sink.
func (r *Relay) fail(box *Outbox, err error) {
	r.Out.Fail = Failure(r.Name, "", -1, err)
	r.In.Ended = true
	r.Out.Flush(box)
}

// RelayMachine is the protocol of a decorator stage (shuffle, batch, map,
// multi-pass, the order's windows): its two links, the credit between
// them, a new pass on a fresh subscription (Reset and ReInit), the
// upstream passes of a multi-pass stage, and what a restart asks again. A
// logic says what the stage does to the items. It is a state machine run
// by actors.machineActor: no actor, goroutine, channel or clock inside.
type RelayMachine struct {
	Relay
	Logic   Logic
	Effects Effects
}

func (m *RelayMachine) Restarted(box *Outbox) {
	// The message that failed was dropped: it may have been an item (ask
	// again from the first one not taken in) or demand (the runner asks
	// the subscriber to open the link again).
	m.In.Reopen(box, m.room())
}

func (m *RelayMachine) Load() (int, int64) { return m.Out.Held(), m.In.Outstanding }

func (m *RelayMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	begin := func(pass uint32) uint32 {
		m.Logic.Start(pass)
		return m.Logic.UpstreamPass(pass)
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
	m.Out.Flush(box)
	m.In.Replenish(box, m.room(), m.In.next)
	return nil
}

// onItem handles an item or the upstream's End; false when there is nothing
// to flush.
func (m *RelayMachine) onItem(box *Outbox, msg any) (bool, error) {
	switch b := msg.(type) {
	case *messages.Batch:
		if !m.In.Admit(box, b.Epoch, b.Seq, m.room()) {
			return false, nil
		}
		out, err := m.Logic.Take(b)
		m.In.Commit()
		if err != nil {
			m.fail(box, err)
			return false, err
		}
		if d, ok := m.Logic.(Dropper); ok {
			m.skipped += d.TakeDropped() // with the items that lack them
		}
		m.push(out)
	case *messages.End:
		if !m.In.AdmitEnd(box, b, m.room()) {
			return false, nil
		}
		m.skipped += b.Skipped
		out, next, more, err := m.Logic.Finish()
		if err != nil {
			m.fail(box, err)
			return false, err
		}
		m.push(out)
		if more {
			m.In.Subscribe(box, next, 0, m.room())
		} else {
			m.In.Ended = true
			m.Out.End = &messages.End{Pass: m.Out.Pass, Count: m.Out.Produced(), Skipped: m.skipped}
		}
	default:
		return false, nil
	}
	return true, nil
}

func (m *RelayMachine) push(out []*messages.Batch) {
	for _, b := range out {
		m.Out.Push(b)
		m.Effects.made(b)
	}
}

// room is how many more input items the stage should ask for.
func (m *RelayMachine) room() int { return m.Capacity - m.Out.Unsent() }

// Failure builds the wire form of a stage error.
func Failure(stage, file string, offset int64, err error) *messages.Failure {
	return &messages.Failure{Stage: stage, File: file, Offset: offset, Class: Classify(err), Cause: fmt.Sprint(err)}
}

// Classify is the class a Failure message gives err: a panic for restarts
// past the supervisor's intensity, else supervisor.Classify's.
func Classify(err error) messages.ErrorClass {
	if errors.Is(err, supervisor.ErrRestartIntensity) {
		return messages.ErrorClass_ERROR_CLASS_PANIC
	}
	return supervisor.Classify(err)
}
