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

// relay is what every stage between one upstream and one downstream stage
// keeps of its two links.
type relay struct {
	in       inlet
	out      outlet
	capacity int    // produced items held unsent before intake pauses
	skipped  uint64 // corrupt records skipped upstream in this pass
}

// linkResult says what onLink did with a message.
type linkResult int

const (
	notLink linkResult = iota // not a link message: the stage handles it
	handled                   // handled, nothing more to do
	flushed                   // handled: flush the outlet and top up demand
)

// onLink handles the link messages every relaying stage treats alike:
// Subscribe (begin starts a new pass and returns the upstream pass to ask
// for), Demand, Cancel, Resubscribe and Failure. An error breaks the
// protocol; the stage fails with it.
func (r *relay) onLink(ctx actor.Context, send func(*actor.PID, any), msg any, room int, begin func(pass uint32) uint32) (linkResult, error) {
	switch m := msg.(type) {
	case *messages.Subscribe:
		switch r.out.classify(m) {
		case staleSub:
			return handled, nil
		case resumeSub:
			return flushed, r.out.subscribe(ctx.Sender(), m)
		}
		r.out.reset(m.Pass)
		r.skipped = 0
		up := begin(m.Pass)
		if err := r.out.subscribe(ctx.Sender(), m); err != nil {
			return handled, err
		}
		r.in.subscribe(send, up, 0, room)
		return flushed, nil
	case *messages.Demand:
		return flushed, r.out.onDemand(m)
	case *messages.Cancel:
		if r.out.cancel(m) {
			r.in.cancel(send)
		}
		return handled, nil
	case *messages.Resubscribe:
		r.in.reopen(send, room)
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

// handle runs msg through onLink, and an item or the upstream's End through
// onItem (which reports whether it produced anything). It reports whether
// the stage should flush its outlet and top up its demand.
func (r *relay) handle(c *cell, ctx actor.Context, send func(*actor.PID, any), msg any, room int,
	begin func(pass uint32) uint32, onItem func(msg any) bool) bool {
	res, err := r.onLink(ctx, send, msg, room, begin)
	switch {
	case err != nil:
		r.fail(c, send, err)
		return false
	case res == notLink:
		return onItem(msg)
	}
	return res == flushed
}

// fail ends the downstream link with err; the pipeline sees it at its sink.
func (r *relay) fail(c *cell, send func(*actor.PID, any), err error) {
	c.pipe.record(c.name, err)
	r.out.fail = failure(c.name, "", -1, err)
	r.in.ended = true
	r.out.flush(send)
}

// transformCell is what a decorator stage persists.
type transformCell struct {
	cell
	relay
	logic logic
}

// transformActor runs a logic between one upstream and one downstream link.
type transformActor struct{ c *transformCell }

func (a *transformActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() { c.meter.gauge(c.out.held(), c.in.outstanding) }()
	msg, send := c.receive(ctx)
	if _, ok := msg.(*actor.Started); ok {
		if c.restarted() {
			// The message that failed was dropped: it may have been an item
			// (ask again from the first one not taken in) or demand (ask the
			// subscriber to open the link again).
			c.in.reopen(send, a.room())
			c.announce(send)
		}
		return
	}
	begin := func(pass uint32) uint32 {
		c.logic.start(pass)
		return c.logic.upstreamPass(pass)
	}
	if c.handle(&c.cell, ctx, send, msg, a.room(), begin, func(msg any) bool { return a.onItem(send, msg) }) {
		c.out.flush(send)
		c.in.replenish(send, a.room(), c.in.next)
	}
}

// onItem handles an item or the upstream's End; false when there is nothing
// to flush.
func (a *transformActor) onItem(send func(*actor.PID, any), msg any) bool {
	c := a.c
	switch m := msg.(type) {
	case *messages.Batch:
		if !c.in.admit(send, m.Epoch, m.Seq, a.room()) {
			return false
		}
		out, err := c.logic.take(m)
		c.in.commit()
		if err != nil {
			c.fail(&c.cell, send, err)
			return false
		}
		a.push(out)
	case *messages.End:
		if !c.in.admitEnd(send, m, a.room()) {
			return false
		}
		c.skipped += m.Skipped
		out, next, more, err := c.logic.finish()
		if err != nil {
			c.fail(&c.cell, send, err)
			return false
		}
		a.push(out)
		if more {
			c.in.subscribe(send, next, 0, a.room())
		} else {
			c.in.ended = true
			c.out.end = &messages.End{Pass: c.out.pass, Count: c.out.produced(), Skipped: c.skipped}
		}
	default:
		return false
	}
	return true
}

func (a *transformActor) push(out []*messages.Batch) {
	for _, b := range out {
		a.c.out.push(b)
		a.c.meter.items.Add(1)
		a.c.pipe.noteProduced(a.c.kind, b)
	}
}

// room is how many more input items the stage should ask for.
func (a *transformActor) room() int { return a.c.capacity - a.c.out.unsent() }

// failure builds the wire form of a stage error.
func failure(stage, file string, offset int64, err error) *messages.Failure {
	return &messages.Failure{Stage: stage, File: file, Offset: offset, Class: classify(err), Cause: fmt.Sprint(err)}
}
