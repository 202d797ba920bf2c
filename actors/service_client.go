package actors

import (
	"errors"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/internal/ticker"
	"github.com/actorfeed/actorfeed/messages"
)

// serviceActor runs the service stage's machine (protocol.ServiceMachine)
// as machineActor runs the others, and does for it what needs a runtime:
// the lease ticks, the probes of lost workers' addresses (a goroutine
// each, joined at the stop), watching workers' nodes, and the snapshot
// Pipeline.ServiceWorkers shows.
type serviceActor struct {
	c       *serviceCell
	tick    *ticker.Ticker
	deliver func(*actor.PID, any)
}

func (a *serviceActor) Receive(ctx actor.Context) {
	c := a.c
	m := &c.m
	msg, box := c.receive(ctx)
	if a.deliver == nil {
		a.deliver = a.sender(ctx)
	}
	defer c.box.Deliver(a.deliver)
	// The workers' snapshot is taken before the pass's end is sent, so
	// that one who sees the pass end sees its last task counted.
	defer a.gauge()
	switch msg.(type) {
	case *actor.Started:
		a.tick = ticker.Start(ctx.ActorSystem().Root, m.Lease/4, ctx.Self(), protocol.Tick{})
		if c.restarted() {
			m.Restarted(box)
			c.announce(box)
		}
		m.Start(box)
	case *actor.Restarting:
		a.tick.Stop()
	case *actor.Stopping:
		a.tick.Stop()
		m.Close(box)
		c.probes.Wait() // within their dial timeout
	default:
		if isSystem(msg) {
			return
		}
		if err := m.Step(box, ctx.Sender(), msg); err != nil {
			a.record(err)
		}
	}
}

// sender sends what the machine put in its outbox: messages as every
// stage sends them, and its requests of the runner done here.
func (a *serviceActor) sender(ctx actor.Context) func(*actor.PID, any) {
	return func(pid *actor.PID, msg any) {
		switch msg := msg.(type) {
		case protocol.Watch:
			ctx.Watch(pid)
		case protocol.Unwatch:
			ctx.Unwatch(pid)
		case protocol.Probe:
			a.probe(ctx, msg.Worker)
		default:
			a.c.send(pid, msg)
		}
	}
}

// probe tries a TCP connection to w's address, apart from the actor, and
// tells the machine whether it answered.
func (a *serviceActor) probe(ctx actor.Context, w *protocol.Worker) {
	self, root, timeout := ctx.Self(), ctx.ActorSystem().Root, min(a.c.m.Lease/2, time.Second)
	addr := w.Addr
	a.c.probes.Go(func() {
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			conn.Close()
		}
		root.Send(self, protocol.Probed{Worker: w, OK: err == nil})
	})
}

// record keeps the error that failed the stage for the pipeline; a
// worker's failure keeps its file and offset.
func (a *serviceActor) record(err error) {
	c := a.c
	if wf, ok := errors.AsType[*protocol.WorkerFailure](err); ok {
		c.pipe.record(c.name, &StageError{Stage: c.name, File: wf.File, Offset: wf.Offset, Record: -1, Class: wf.Class, Err: wf.Err})
	}
	c.pipe.record(c.name, err)
}

// noteCorrupt lists the damaged chunks a worker skipped as the pipeline's
// own, named by the pipeline's file names.
func (c *serviceCell) noteCorrupt(list []*messages.CorruptChunk) {
	for _, cc := range list {
		if c.files == nil || int(cc.File) >= len(c.files.names) {
			continue // not a file of the job: nothing to name
		}
		c.pipe.corrupt.note(CorruptChunk{File: c.files.names[cc.File], Offset: cc.Offset, Records: int(cc.Records), Err: errors.New(cc.Cause)})
	}
}

// gauge records the stage's load and what it knows of its workers.
func (a *serviceActor) gauge() {
	c := a.c
	c.meter.gauge(c.m.Load())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap = c.snap[:0]
	for i, w := range c.m.Workers {
		c.snap = append(c.snap, ServiceWorker{Addr: w.Addr, State: w.State(), Batches: w.Batches, Bytes: w.Bytes, Tasks: w.Taken,
			Lost: w.Lost, Why: w.Why, Reassigned: w.Reassigned, Credit: c.m.WorkerCredit(i)})
	}
}
