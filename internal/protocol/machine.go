package protocol

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// Machine is a stage's protocol as a state machine, in the manner of etcd's
// raft: Step takes one message (an event) and puts the messages it decides
// to send in box. Nothing in a machine is an actor, goroutine, channel or
// clock, so tests drive it with events and read its actions back
// (machine_test.go), and fuzz targets feed it random sequences of them.
type Machine interface {
	// Step takes a message from from. An error has failed the stage's
	// downstream link already; the runner records it for the pipeline.
	Step(box *Outbox, from *actor.PID, msg any) error
	// Restarted is a new instance's start after a crash: the message that
	// failed was lost, whatever it was.
	Restarted(box *Outbox)
	// Load is what the stage holds and has demanded, for its meter.
	Load() (held int, demand int64)
}

// Effects are what a machine tells the rest of the pipeline and never reads
// back: the items it made (its meter, and the pipeline's count of live
// batches) and the batches it drops. Tests leave them out.
type Effects struct {
	Produced func(*messages.Batch)
	Dropped  func(*messages.Batch)
	Ahead    func(delta int64) // items read ahead of the lanes' pass (the double buffer)
}

func (e Effects) made(b *messages.Batch) {
	if e.Produced != nil {
		e.Produced(b)
	}
}

func (e Effects) drop(b *messages.Batch) {
	if e.Dropped != nil {
		e.Dropped(b)
	}
}

func (e Effects) readAhead(delta int64) {
	if e.Ahead != nil {
		e.Ahead(delta)
	}
}
