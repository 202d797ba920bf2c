package protocol

import "github.com/asynkron/protoactor-go/actor"

// envelope is one message a protocol step decided to send.
type envelope struct {
	to  *actor.PID
	msg any
}

// Outbox holds the messages the protocol's state machines (a link's inlet
// and outlet, and the stages' machines, Machine) decide to send during
// one step. The machines only append here; the actor that runs them sends
// the messages in order once the step is over (actors.cell.post), as etcd's raft
// hands its messages out in Ready. So a machine is a plain value that a
// test drives with events and whose actions it reads back.
type Outbox struct{ msgs []envelope }

// Put queues msg for to.
func (b *Outbox) Put(to *actor.PID, msg any) { b.msgs = append(b.msgs, envelope{to, msg}) }

// Deliver sends the queued messages with send, in order, and empties the
// outbox.
func (b *Outbox) Deliver(send func(*actor.PID, any)) {
	for i, e := range b.msgs {
		send(e.to, e.msg)
		b.msgs[i] = envelope{}
	}
	b.msgs = b.msgs[:0]
}
