package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// machine is a stage's protocol as a state machine, in the manner of etcd's
// raft: step takes one message (an event) and puts the messages it decides
// to send in box. Nothing in a machine is an actor, goroutine, channel or
// clock, so tests drive it with events and read its actions back
// (machine_test.go), and fuzz targets feed it random sequences of them.
type machine interface {
	// step takes a message from from. An error has failed the stage's
	// downstream link already; the runner records it for the pipeline.
	step(box *outbox, from *actor.PID, msg any) error
	// restarted is a new instance's start after a crash: the message that
	// failed was lost, whatever it was.
	restarted(box *outbox)
	// load is what the stage holds and has demanded, for its meter.
	load() (held int, demand int64)
}

// effects are what a machine tells the rest of the pipeline and never reads
// back: the items it made (its meter, and the pipeline's count of live
// batches) and the batches it drops. Tests leave them out.
type effects struct {
	produced func(*messages.Batch)
	dropped  func(*messages.Batch)
	ahead    func(delta int64) // items read ahead of the lanes' pass (the double buffer)
}

func (e effects) made(b *messages.Batch) {
	if e.produced != nil {
		e.produced(b)
	}
}

func (e effects) drop(b *messages.Batch) {
	if e.dropped != nil {
		e.dropped(b)
	}
}

func (e effects) readAhead(delta int64) {
	if e.ahead != nil {
		e.ahead(delta)
	}
}

// stageEffects are the effects of the stage c.
func stageEffects(c *cell) effects {
	return effects{
		produced: func(b *messages.Batch) {
			c.meter.items.Add(1)
			c.pipe.noteProduced(c.kind, b)
		},
		dropped: c.pipe.discard,
		ahead:   func(delta int64) { c.pipe.ahead.Add(delta) },
	}
}

// machineActor is the one actor that runs any machine: it counts and
// shows each message to the fault injector (cell.receive), hands it to
// the machine, sends what the machine decided, and on a restart lets the
// machine ask again for what may have been lost and asks the stages it
// feeds to open their links again.
type machineActor struct {
	c *cell
	m machine
}

func (a *machineActor) Receive(ctx actor.Context) {
	c := a.c
	msg, box := c.receive(ctx)
	defer c.post()
	defer func() { c.meter.gauge(a.m.load()) }()
	if _, ok := msg.(*actor.Started); ok {
		if c.restarted() {
			a.m.restarted(box)
			c.announce(box)
		}
		return
	}
	if isSystem(msg) {
		return
	}
	if err := a.m.step(box, ctx.Sender(), msg); err != nil {
		c.pipe.record(c.name, err)
	}
}
