package actors

import "github.com/asynkron/protoactor-go/actor"

// envelope is one message a protocol step decided to send.
type envelope struct {
	to  *actor.PID
	msg any
}

// outbox holds the messages the protocol's state machines (a link's inlet
// and outlet, and the stages' machines, machine.go) decide to send during
// one step. The machines only append here; the actor that runs them sends
// the messages in order once the step is over (cell.post), as etcd's raft
// hands its messages out in Ready. So a machine is a plain value that a
// test drives with events and whose actions it reads back.
type outbox struct{ msgs []envelope }

// put queues msg for to.
func (b *outbox) put(to *actor.PID, msg any) { b.msgs = append(b.msgs, envelope{to, msg}) }

// deliver sends the queued messages with send, in order, and empties the
// outbox.
func (b *outbox) deliver(send func(*actor.PID, any)) {
	for i, e := range b.msgs {
		send(e.to, e.msg)
		b.msgs[i] = envelope{}
	}
	b.msgs = b.msgs[:0]
}
