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

// transformCell is what a decorator stage persists.
type transformCell struct {
	cell
	in       inlet
	out      outlet
	logic    logic
	capacity int    // produced items held unsent before intake pauses
	skipped  uint64 // corrupt records skipped upstream in this pass
}

// transformActor runs a logic between one upstream and one downstream link.
type transformActor struct{ c *transformCell }

func (a *transformActor) Receive(ctx actor.Context) {
	c := a.c
	msg, send := c.receive(ctx)
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			// The message that failed was dropped: it may have been an item
			// (ask again from the first one not taken in) or demand (ask the
			// subscriber to open the link again).
			c.in.reopen(send, a.room())
			c.announce(send)
		}
		return
	case *messages.Subscribe:
		if c.out.sub != nil && m.Epoch <= c.out.epoch {
			return // an old request
		}
		if c.out.sub == nil || m.Pass != c.out.pass {
			c.out.reset(m.Pass)
			c.logic.start(m.Pass)
			c.skipped = 0
			if err := c.out.subscribe(ctx.Sender(), m); err != nil {
				a.fail(ctx, err)
				return
			}
			c.in.subscribe(send, c.logic.upstreamPass(m.Pass), 0, a.room())
		} else if err := c.out.subscribe(ctx.Sender(), m); err != nil {
			a.fail(ctx, err)
			return
		}
	case *messages.Demand:
		if err := c.out.onDemand(m); err != nil {
			a.fail(ctx, err)
			return
		}
	case *messages.Cancel:
		if m.Epoch == c.out.epoch && !c.out.closed {
			c.out.closed = true
			if c.in.open && !c.in.ended {
				send(c.in.pub, &messages.Cancel{Epoch: c.in.epoch})
				c.in.ended = true
			}
		}
		return
	case *messages.Resubscribe:
		c.in.reopen(send, a.room())
		return
	case *messages.Batch:
		if !c.in.admit(send, m.Epoch, m.Seq, a.room()) {
			return
		}
		out, err := c.logic.take(m)
		c.in.commit()
		if err != nil {
			a.fail(ctx, err)
			return
		}
		a.push(out)
	case *messages.End:
		if !c.in.admitEnd(send, m, a.room()) {
			return
		}
		c.skipped += m.Skipped
		out, next, more, err := c.logic.finish()
		if err != nil {
			a.fail(ctx, err)
			return
		}
		a.push(out)
		if more {
			c.in.subscribe(send, next, 0, a.room())
		} else {
			c.in.ended = true
			c.out.end = &messages.End{Pass: c.out.pass, Count: c.out.produced(), Skipped: c.skipped}
		}
	case *messages.Failure:
		if !c.in.current(m.Epoch) {
			return
		}
		c.in.ended = true
		c.out.fail = m
	default:
		return
	}
	c.out.flush(send)
	c.in.replenish(send, a.room(), c.in.next)
}

func (a *transformActor) push(out []*messages.Batch) {
	for _, b := range out {
		a.c.out.push(b)
		a.c.pipe.noteProduced(a.c.kind, b)
	}
}

// room is how many more input items the stage should ask for.
func (a *transformActor) room() int { return a.c.capacity - a.c.out.unsent() }

// fail ends the downstream link with err; the pipeline sees it at its sink.
func (a *transformActor) fail(ctx actor.Context, err error) {
	c := a.c
	c.pipe.record(c.name, err)
	c.out.fail = failure(c.name, "", -1, err)
	c.in.ended = true
	c.out.flush(sender(ctx))
}

// failure builds the wire form of a stage error.
func failure(stage, file string, offset int64, err error) *messages.Failure {
	return &messages.Failure{Stage: stage, File: file, Offset: offset, Class: classify(err), Cause: fmt.Sprint(err)}
}
