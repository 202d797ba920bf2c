package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
)

// cell is the part of a stage that outlives the stage's actor instances: a
// restart creates a new instance over the same cell, so the stage resumes
// from the position it persisted there.
type cell struct {
	name, kind string
	pipe       *shared
	received   int64 // user messages received, counted before handling
	started    bool
	meter      meter
	down       []*actor.PID // the stages this one feeds, fixed at build
	// where, when set, names the file and record the stage is at, for the
	// error of a pipeline stopped by this stage's restarts.
	where func() (file string, record int64)
	// send is sender(sendCtx), kept while the actor instance (and so its
	// context) stays the same.
	sendCtx actor.Context
	send    func(*actor.PID, any)
	// box holds what the stage's protocol decided to send while it
	// handles a message; post sends it.
	box protocol.Outbox
}

// receive starts the handling of a message: a protocol message is counted
// and shown to the fault injector (which may panic) before anything else.
// It returns the message and the outbox the stage's protocol puts what it
// sends in; the actor defers post to send it.
func (c *cell) receive(ctx actor.Context) (any, *protocol.Outbox) {
	msg := ctx.Message()
	if c.sendCtx != ctx {
		c.sendCtx, c.send = ctx, sender(ctx)
	}
	if !isSystem(msg) {
		c.before(msg)
	}
	return msg, &c.box
}

// post sends what the stage put in its outbox while handling a message,
// in order; deferred, so that what a step decided before a panic leaves
// as it did before the outbox existed.
func (c *cell) post() { c.box.Deliver(c.send) }

// meter is what a stage shows while it runs: counters and gauges its actor
// updates and Pipeline.StageStats reads from any goroutine.
type meter struct {
	items    atomic.Int64 // produced (consumed, for a consumer), all passes
	held     atomic.Int64 // items held: produced and not acknowledged, or queued
	demand   atomic.Int64 // demand outstanding on its upstream link
	restarts atomic.Int64
}

// gauge records the stage's buffer depth and outstanding demand.
func (m *meter) gauge(held int, demand int64) {
	m.held.Store(int64(held))
	m.demand.Store(demand)
}

// task is a goroutine an actor instance owns: started with the actor's
// context, cancelled and joined when the instance stops or restarts. A
// panic in it is carried into the actor (crashed), which panics with it so
// that supervision sees it.
type task struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returns
}

func (t *task) start(ctx actor.Context, base context.Context, run func(context.Context)) {
	rctx, cancel := context.WithCancel(base)
	done := make(chan struct{})
	t.cancel, t.done = cancel, done
	self, sys := ctx.Self(), ctx.ActorSystem()
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				sys.Root.Send(self, &crashed{reason: r})
			}
		}()
		run(rctx)
	}()
}

// stop cancels the goroutine and waits for it; stopping a task that never
// started, or twice, does nothing.
func (t *task) stop() { t.stopWithin(-1) }

// stopWithin cancels the goroutine and waits for it at most grace (without
// limit when grace is negative). It reports false when the goroutine was
// still running then: it is abandoned, and must not touch what the actor
// owns if it ever returns. Only user code ignoring its ctx gets there: a
// stop that waited for it would hang Close (docs/reliability.md).
func (t *task) stopWithin(grace time.Duration) bool {
	if t.cancel == nil {
		return true
	}
	t.cancel()
	t.cancel = nil
	return join(t.done, 1, grace)
}

// join waits for n signals on done (or its close), for at most grace when
// grace is not negative, and reports whether they all came.
func join(done <-chan struct{}, n int, grace time.Duration) bool {
	var expire <-chan time.Time
	if grace >= 0 {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		expire = timer.C
	}
	for range n {
		select {
		case <-done:
		case <-expire:
			return false
		}
	}
	return true
}

// crashed carries a panic of an owned goroutine into its actor.
type crashed struct{ reason any }

// before is called for every user message before it is handled: it counts
// the message and gives the fault injector its chance to panic. The count
// is persisted, so a fault scheduled at message N fires once.
func (c *cell) before(msg any) {
	c.received++
	if c.pipe.faults != nil {
		c.pipe.faults.BeforeMessage(c.name, c.kind, c.received, msg)
	}
}

// restarted records a start of a new instance; it reports whether this start
// is a restart.
func (c *cell) restarted() bool {
	if !c.started {
		c.started = true
		return false
	}
	c.meter.restarts.Add(1)
	c.pipe.restarts.Add(1)
	return true
}

// announce asks every stage this one feeds to open its link again: after a
// restart the dropped message may have been a subscription or demand.
func (c *cell) announce(box *protocol.Outbox) {
	for _, pid := range c.down {
		box.Put(pid, &messages.Resubscribe{Stage: c.name})
	}
}

// isSystem tells protoactor's lifecycle messages from the protocol's.
func isSystem(msg any) bool {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.ReceiveTimeout:
		return true
	}
	return false
}

// sender returns the function a stage sends protocol messages with. Messages
// that travel upstream go as requests so that the receiver learns who sent
// them (a stage with several subscribers tells them apart so); items go as
// plain sends, which allocate nothing.
func sender(ctx actor.Context) func(*actor.PID, any) {
	return func(pid *actor.PID, msg any) {
		switch msg.(type) {
		case *messages.Subscribe, *messages.Assign, *messages.Demand, *messages.Resubscribe,
			*messages.ServiceHello, *messages.ServiceTask: // a worker answers its client
			ctx.Request(pid, msg)
		default:
			ctx.Send(pid, msg)
		}
	}
}
