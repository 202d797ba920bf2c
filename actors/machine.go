package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
)

// stageEffects are the effects of the stage c.
func stageEffects(c *cell) protocol.Effects {
	return protocol.Effects{
		Produced: func(b *messages.Batch) {
			c.meter.items.Add(1)
			c.pipe.noteProduced(c.kind, b)
		},
		Dropped: c.pipe.discard,
		Ahead:   func(delta int64) { c.pipe.ahead.Add(delta) },
	}
}

// machineActor is the one actor that runs any machine: it counts and
// shows each message to the fault injector (cell.receive), hands it to
// the machine, sends what the machine decided, and on a restart lets the
// machine ask again for what may have been lost and asks the stages it
// feeds to open their links again.
type machineActor struct {
	c *cell
	m protocol.Machine
}

func (a *machineActor) Receive(ctx actor.Context) {
	c := a.c
	msg, box := c.receive(ctx)
	defer c.post()
	defer func() { c.meter.gauge(a.m.Load()) }()
	if _, ok := msg.(*actor.Started); ok {
		if c.restarted() {
			a.m.Restarted(box)
			c.announce(box)
		}
		return
	}
	if isSystem(msg) {
		return
	}
	if err := a.m.Step(box, ctx.Sender(), msg); err != nil {
		c.pipe.record(c.name, err)
	}
}
