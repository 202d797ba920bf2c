package protocol

import (
	"fmt"
	"math"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// Outlet is the publisher's half of a link. It keeps every item it produced
// from the oldest one its subscriber has not acknowledged, so a restarted
// subscriber can ask for them again; it sends only what was demanded. An
// outlet lives in a stage's cell, so it survives restarts of the stage.
type Outlet struct {
	sub    *actor.PID
	Epoch  uint64
	Pass   uint32
	demand int64
	Base   uint64            // sequence number of items[0]
	Items  []*messages.Batch // produced from base on; epoch and seq unset
	Sent   uint64            // next sequence number to send
	End    *messages.End     // the pass is over once items are sent
	Fail   *messages.Failure // the link ends with this instead
	done   bool              // End or Failure sent: nothing more on this epoch
	Closed bool              // cancelled by the subscriber
	idle   bool              // reset, and no subscription for the pass yet
}

// Reset starts pass on the outlet, forgetting everything of the last one.
// Until a subscription for the pass comes, nothing is sent and demand on
// the old epoch is ignored: a double buffer's lane that has not heard of
// the new pass yet would otherwise take its first items as the old
// pass's, and acknowledge them.
func (o *Outlet) Reset(pass uint32) {
	clear(o.Items)
	o.Items, o.Base, o.Sent, o.Pass, o.idle = o.Items[:0], 0, 0, pass, true
	o.End, o.Fail, o.done, o.Closed = nil, nil, false, false
	o.demand = 0 // a new pass is demanded by a new subscription
}

// Produced is the number of items produced in the pass.
func (o *Outlet) Produced() uint64 { return o.Base + uint64(len(o.Items)) }

// Unsent is the number of produced items not yet sent.
func (o *Outlet) Unsent() int { return int(o.Produced() - o.Sent) }

// Held is the number of items the outlet holds: unsent ones and sent ones
// not yet acknowledged.
func (o *Outlet) Held() int { return len(o.Items) }

// Push appends a produced item.
func (o *Outlet) Push(b *messages.Batch) { o.Items = append(o.Items, b) }

// Subscribe (re)opens the link for sub from sequence number from. It fails
// when from lies before what the outlet still holds or beyond what it
// produced: the subscriber asks for items that cannot be served.
func (o *Outlet) Subscribe(sub *actor.PID, m *messages.Subscribe) error {
	if m.Demand < 0 {
		return fmt.Errorf("%w: subscribe with demand %d", ErrProtocol, m.Demand)
	}
	if m.From < o.Base || m.From > o.Produced() {
		return fmt.Errorf("%w: subscribe from %d, but items %d..%d are held", ErrProtocol, m.From, o.Base, o.Produced())
	}
	o.sub, o.Epoch, o.demand = sub, m.Epoch, m.Demand
	o.ack(m.From)
	o.Sent = m.From
	o.done, o.Closed, o.idle = false, false, false
	return nil
}

// subscription is what a Subscribe asks of the outlet (see classify).
type subscription int

const (
	staleSub  subscription = iota // an old request: ignore it
	resumeSub                     // the pass it serves, from From: subscribe
	freshSub                      // another pass: the stage starts it, then subscribe
)

// classify sorts a Subscribe: an epoch no newer than the link's is an old
// request; the pass it serves is reopened from m.From (a restarted
// subscriber); another pass starts afresh (Reset, or multi-pass), and so
// does the pass of a cancelled link: Cancel closed the stage's links
// upstream, and a stage resumed over them would wait for them forever.
func (o *Outlet) classify(m *messages.Subscribe) subscription {
	switch {
	case o.sub != nil && m.Epoch <= o.Epoch:
		return staleSub
	case o.sub != nil && m.Pass == o.Pass && !o.Closed:
		return resumeSub
	}
	return freshSub
}

// OutletEvent is what a subscriber's message asks of the stage whose
// outlet took it (Outlet.Step).
type OutletEvent int

const (
	notOutlet     OutletEvent = iota // not a subscriber's message
	outletIgnored                    // stale or repeated: nothing changed
	outletFlush                      // the link reopened or got demand: flush
	OutletBegin                      // a new pass: the outlet is reset and subscribed; the stage begins it, then flushes
	OutletCancel                     // the subscriber cancelled: the stage stops what feeds it
)

// Step is the publisher's side of the stream protocol, written once for
// every stage that serves one subscriber (open_files, the relays, the
// merge stage, the data service's client): it takes Subscribe, Demand and
// Cancel from the subscriber from and says what the stage must do. For a
// new pass the outlet forgets the last one before it subscribes, so a
// stage begins its pass with the outlet already open: what it pushes then
// goes to the new epoch. An error breaks the protocol and changes nothing;
// the stage fails.
func (o *Outlet) Step(from *actor.PID, msg any) (OutletEvent, error) {
	switch m := msg.(type) {
	case *messages.Subscribe:
		switch o.classify(m) {
		case staleSub:
			return outletIgnored, nil
		case resumeSub:
			return outletFlush, o.Subscribe(from, m)
		}
		if m.From != 0 || m.Demand < 0 {
			// Checked before the outlet forgets the last pass: the stage,
			// which begins a pass only on outletBegin, would keep its
			// state of the last one. (Found by FuzzXMapMachine.)
			return outletIgnored, fmt.Errorf("%w: a new pass subscribed from %d with demand %d", ErrProtocol, m.From, m.Demand)
		}
		o.Reset(m.Pass)
		return OutletBegin, o.Subscribe(from, m)
	case *messages.Demand:
		return outletFlush, o.OnDemand(m)
	case *messages.Cancel:
		// Cancel is idempotent, and one of an old epoch is not this link's.
		if m.Epoch != o.Epoch || o.Closed {
			return outletIgnored, nil
		}
		o.Closed = true
		return OutletCancel, nil
	}
	return notOutlet, nil
}

// ack forgets the items below seq.
func (o *Outlet) ack(seq uint64) {
	if seq <= o.Base {
		return
	}
	n := int(min(seq, o.Produced()) - o.Base)
	clear(o.Items[:n])
	o.Items = o.Items[n:]
	o.Base += uint64(n)
}

// OnDemand adds demand (additive, saturating) and takes the acknowledgement.
// Demand for an old epoch is ignored; a demand <= 0 is a protocol error.
func (o *Outlet) OnDemand(m *messages.Demand) error {
	if m.Epoch != o.Epoch || o.idle {
		return nil
	}
	if m.N <= 0 {
		return fmt.Errorf("%w: demand %d on epoch %d", ErrProtocol, m.N, m.Epoch)
	}
	if m.Ack > o.Sent {
		// Forgetting items not sent yet would leave the link nothing to
		// send them from (found by FuzzRelayMachine).
		return fmt.Errorf("%w: demand on epoch %d acknowledges %d items, but %d were sent", ErrProtocol, m.Epoch, m.Ack, o.Sent)
	}
	if o.demand > math.MaxInt64-m.N {
		o.demand = math.MaxInt64
	} else {
		o.demand += m.N
	}
	o.ack(m.Ack)
	return nil
}

// Flush sends what the subscriber demanded, then End or Failure once
// everything is sent.
func (o *Outlet) Flush(box *Outbox) {
	if o.sub == nil || o.done || o.Closed || o.idle {
		return
	}
	for o.demand > 0 && o.Sent < o.Produced() {
		b := o.Items[o.Sent-o.Base]
		box.Put(o.sub, &messages.Batch{Epoch: o.Epoch, Seq: o.Sent, Pass: b.Pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids,
			Source: b.Source, First: b.First, Count: b.Count, Skipped: b.Skipped, Position: b.Position, Positions: b.Positions, Padding: b.Padding, Run: b.Run, Cuts: b.Cuts, OrderPass: b.OrderPass})
		o.Sent++
		o.demand--
	}
	if o.Fail != nil {
		f := o.Fail // a template: every epoch gets its own message
		box.Put(o.sub, &messages.Failure{Epoch: o.Epoch, Stage: f.Stage, File: f.File, Offset: f.Offset, Class: f.Class, Cause: f.Cause})
		o.done = true
	} else if o.End != nil && o.Sent == o.Produced() {
		box.Put(o.sub, &messages.End{Epoch: o.Epoch, Pass: o.End.Pass, Count: o.End.Count, Skipped: o.End.Skipped})
		o.done = true
	}
}

// Inlet is the subscriber's half of a link. It takes items strictly in
// sequence order from the current epoch and keeps the publisher's demand
// topped up to its window, in steps of at least half of what the stage can
// take (see replenish) so that demand travels in few messages.
type Inlet struct {
	Pub         *actor.PID
	epoch       uint64
	Pass        uint32
	next        uint64 // next sequence number expected
	Outstanding int64  // demanded and not yet received
	Window      int64
	// Reach is the most room its stage ever reports (its capacity), when
	// that is less than the window; 0 means the window.
	Reach int64
	Ended bool
	Open  bool // subscribed at least once
	// stride is how far the epoch moves on each subscription (0: 1): the
	// merge stage's links from its lanes take turns at epochs, so that an
	// item's epoch names its lane.
	stride uint64
	// Lane is the lane of a stage that feeds several (a lane's first
	// stage after the deal stage), sent with every subscription.
	Lane uint32
}

// Step is the smallest top-up replenish sends: half of the most the link
// can have outstanding.
func (in *Inlet) Step() int64 {
	most := in.Window
	if in.Reach > 0 {
		most = min(most, in.Reach)
	}
	return DemandStep(most)
}

// DemandStep is the smallest grant worth a message on a link that can have
// at most most items outstanding: half of them, at least 1. Every grant of
// demand in the pipeline waits for it (Inlet.Replenish, open_files' credit
// to its readers, a device's notices to its actor).
func DemandStep[T int | int64](most T) T { return max(1, most/2) }

// Subscribe opens the link again under a new epoch from sequence number
// from, granting up to room items at once.
func (in *Inlet) Subscribe(box *Outbox, pass uint32, from uint64, room int) {
	in.epoch += max(in.stride, 1)
	in.Pass, in.next, in.Ended, in.Open = pass, from, false, true
	in.Outstanding = min(in.Window, int64(max(room, 0)))
	box.Put(in.Pub, &messages.Subscribe{Epoch: in.epoch, Pass: pass, From: from, Demand: in.Outstanding, Lane: in.Lane})
}

// verdict says what to do with an arriving item.
type verdict int

const (
	take  verdict = iota // in order: use it
	stale                // an old epoch or a duplicate: drop it
	gap                  // an item is missing: drop it and subscribe again
)

// Reopen subscribes again under a new epoch from the first item not taken
// in, if the link is open and its pass not over: after a restart (the
// dropped message may have been an item), or when the publisher restarted.
func (in *Inlet) Reopen(box *Outbox, room int) {
	if in.Open && !in.Ended {
		in.Subscribe(box, in.Pass, in.next, room)
	}
}

// check sorts an arriving item by its epoch and sequence number, changing
// nothing: the item is counted by commit once it has been used, so an item
// whose handling panics is asked for again after the restart.
func (in *Inlet) check(epoch, seq uint64) verdict {
	switch {
	case epoch != in.epoch || in.Ended:
		return stale
	case seq < in.next:
		return stale
	case in.Outstanding <= 0:
		// More than was demanded: a publisher that breaks the protocol.
		// Taking it would overdraw the credit; dropping it leaves a gap
		// that the next item shows, and the link is opened again there.
		return stale
	case seq > in.next:
		return gap
	}
	return take
}

// Commit counts the item admit let in, once it has been used.
func (in *Inlet) Commit() {
	in.next++
	in.Outstanding--
}

// Admit decides on an arriving item: true to use it (then commit it);
// false when it is stale (dropped) or follows a gap (dropped, and the link
// is opened again from the first missing item).
func (in *Inlet) Admit(box *Outbox, epoch, seq uint64, room int) bool {
	switch in.check(epoch, seq) {
	case take:
		return true
	case gap:
		in.Subscribe(box, in.Pass, in.next, room)
	}
	return false
}

// AdmitEnd decides on an arriving End: true when it closes the current
// epoch after exactly the items taken in. An End that says more items were
// sent than arrived opens the link again.
func (in *Inlet) AdmitEnd(box *Outbox, m *messages.End, room int) bool {
	if !in.Current(m.Epoch) {
		return false
	}
	if m.Count != in.next {
		in.Subscribe(box, in.Pass, in.next, room)
		return false
	}
	return true
}

// cancel closes the link from this side, if it is open: the stage's own
// subscriber cancelled, so nothing more is wanted from upstream.
func (in *Inlet) cancel(box *Outbox) {
	if in.Open && !in.Ended {
		box.Put(in.Pub, &messages.Cancel{Epoch: in.epoch})
		in.Ended = true
	}
}

// Current says whether a control message (End, Failure) belongs to the
// current epoch.
func (in *Inlet) Current(epoch uint64) bool { return epoch == in.epoch && !in.Ended }

// Replenish tops the outstanding demand up to min(window, room), once the
// top-up is worth a message: at least Step(). ack is the sequence number
// below which every item has been taken in for good.
//
// A smaller top-up waits, even with nothing outstanding, and the link
// cannot stall for it: a room less than Step() is less than the stage's
// reach, so the stage holds items (unsent output, a queue) that its
// downstream takes, and every item taken calls replenish again, with more
// room. At the sink, a device's queue drains by itself. Upstream, this is
// what keeps a stage that is full by one item from asking for items one
// at a time: demand goes out in halves of the stage's room, as Reactive
// Streams' request(n) batching does.
func (in *Inlet) Replenish(box *Outbox, room int, ack uint64) {
	if !in.Open || in.Ended {
		return
	}
	want := min(in.Window, int64(max(room, 0))) - in.Outstanding
	if want < in.Step() { // Step is at least 1
		return
	}
	in.Outstanding += want
	box.Put(in.Pub, &messages.Demand{Epoch: in.epoch, N: want, Ack: ack})
}
