package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
)

// xmapActor is one incarnation of an xmap stage: it runs its machine and
// owns the worker goroutines, which it starts when it starts (or a pass
// begins) and cancels and joins when it stops or restarts.
type xmapActor struct {
	c        *cell
	m        *protocol.XMapMachine
	fn       SampleMapFunc
	workers  int
	jobs     chan protocol.Job
	cancel   context.CancelFunc
	finished chan struct{} // a signal per worker that returned
}

func (a *xmapActor) Receive(ctx actor.Context) {
	c, m := a.c, a.m
	msg, box := c.receive(ctx)
	defer c.post()
	defer func() { c.meter.gauge(m.Load()) }()
	switch r := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			m.Restarted(box)
			c.announce(box)
		}
		a.start(ctx)
		a.dispatch()
		return
	case *actor.Stopping, *actor.Restarting:
		a.stop()
		return
	case *protocol.Mapped:
		if r.Run == m.Run && r.Panic != nil {
			panic(r.Panic)
		}
	}
	run := m.Run
	if err := m.Step(box, ctx.Sender(), msg); err != nil {
		c.pipe.record(c.name, err)
	}
	if m.Run != run { // a new pass: the workers of the last are not wanted
		a.stop()
		a.start(ctx)
	}
	a.dispatch()
}

// dispatch hands the workers the jobs of the last step.
func (a *xmapActor) dispatch() {
	for _, j := range a.m.Jobs {
		a.jobs <- j // never blocks: room keeps the items with the workers within the channel's capacity
	}
	clear(a.m.Jobs)
	a.m.Jobs = a.m.Jobs[:0]
}

// start begins a new incarnation of the worker pool, for the machine's run.
func (a *xmapActor) start(ctx actor.Context) {
	jobs, finished := make(chan protocol.Job, a.m.Limit), make(chan struct{}, a.workers)
	a.jobs, a.finished = jobs, finished
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	self, root, pass := ctx.Self(), ctx.ActorSystem().Root, a.m.Out.Pass
	// The workers hold this incarnation's channels, not the actor's fields:
	// a worker abandoned by stop never takes a later incarnation's job.
	for range a.workers {
		go func() {
			defer func() { finished <- struct{}{} }()
			for {
				select {
				case j := <-jobs:
					root.Send(self, a.work(j, pass))
				case <-rctx.Done():
					return
				}
			}
		}()
	}
}

// work runs the function on one item, catching a panic.
func (a *xmapActor) work(j protocol.Job, pass uint32) (m *protocol.Mapped) {
	m = &protocol.Mapped{Run: j.Run, Seq: j.Seq}
	defer func() {
		if r := recover(); r != nil {
			m.Item, m.Err, m.Panic = nil, nil, fmt.Sprintf("xmap function: %v", r)
		}
	}()
	m.Item, m.Dropped, m.Err = apply(a.c.pipe, a.fn, pass, j.Item, nil)
	return m
}

// stop cancels the workers and waits for them: a worker finishes the item
// it is on first. A function that does not return within
// Options.StopGrace is abandoned (Close reports it): its result carries an
// old run number, so it is never used.
func (a *xmapActor) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	if !join(a.finished, a.workers, a.c.pipe.opts.StopGrace) {
		a.c.pipe.abandon(fmt.Sprintf("stage %s's function", a.c.name))
	}
}
