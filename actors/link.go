package actors

import (
	"fmt"
	"math"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// outlet is the publisher's half of a link. It keeps every item it produced
// from the oldest one its subscriber has not acknowledged, so a restarted
// subscriber can ask for them again; it sends only what was demanded. An
// outlet lives in a stage's cell, so it survives restarts of the stage.
type outlet struct {
	sub    *actor.PID
	epoch  uint64
	pass   uint32
	demand int64
	base   uint64            // sequence number of items[0]
	items  []*messages.Batch // produced from base on; epoch and seq unset
	sent   uint64            // next sequence number to send
	end    *messages.End     // the pass is over once items are sent
	fail   *messages.Failure // the link ends with this instead
	done   bool              // End or Failure sent: nothing more on this epoch
	closed bool              // cancelled by the subscriber
	idle   bool              // reset, and no subscription for the pass yet
}

// reset starts pass on the outlet, forgetting everything of the last one.
// Until a subscription for the pass comes, nothing is sent and demand on
// the old epoch is ignored: a double buffer's lane that has not heard of
// the new pass yet would otherwise take its first items as the old
// pass's, and acknowledge them.
func (o *outlet) reset(pass uint32) {
	clear(o.items)
	o.items, o.base, o.sent, o.pass, o.idle = o.items[:0], 0, 0, pass, true
	o.end, o.fail, o.done, o.closed = nil, nil, false, false
	o.demand = 0 // a new pass is demanded by a new subscription
}

// produced is the number of items produced in the pass.
func (o *outlet) produced() uint64 { return o.base + uint64(len(o.items)) }

// unsent is the number of produced items not yet sent.
func (o *outlet) unsent() int { return int(o.produced() - o.sent) }

// held is the number of items the outlet holds: unsent ones and sent ones
// not yet acknowledged.
func (o *outlet) held() int { return len(o.items) }

// push appends a produced item.
func (o *outlet) push(b *messages.Batch) { o.items = append(o.items, b) }

// subscribe (re)opens the link for sub from sequence number from. It fails
// when from lies before what the outlet still holds or beyond what it
// produced: the subscriber asks for items that cannot be served.
func (o *outlet) subscribe(sub *actor.PID, m *messages.Subscribe) error {
	if m.Demand < 0 {
		return fmt.Errorf("%w: subscribe with demand %d", ErrProtocol, m.Demand)
	}
	if m.From < o.base || m.From > o.produced() {
		return fmt.Errorf("%w: subscribe from %d, but items %d..%d are held", ErrProtocol, m.From, o.base, o.produced())
	}
	o.sub, o.epoch, o.demand = sub, m.Epoch, m.Demand
	o.ack(m.From)
	o.sent = m.From
	o.done, o.closed, o.idle = false, false, false
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
func (o *outlet) classify(m *messages.Subscribe) subscription {
	switch {
	case o.sub != nil && m.Epoch <= o.epoch:
		return staleSub
	case o.sub != nil && m.Pass == o.pass && !o.closed:
		return resumeSub
	}
	return freshSub
}

// outletEvent is what a subscriber's message asks of the stage whose
// outlet took it (outlet.step).
type outletEvent int

const (
	notOutlet     outletEvent = iota // not a subscriber's message
	outletIgnored                    // stale or repeated: nothing changed
	outletFlush                      // the link reopened or got demand: flush
	outletBegin                      // a new pass: the outlet is reset and subscribed; the stage begins it, then flushes
	outletCancel                     // the subscriber cancelled: the stage stops what feeds it
)

// step is the publisher's side of the stream protocol, written once for
// every stage that serves one subscriber (open_files, the relays, the
// merge stage, the data service's client): it takes Subscribe, Demand and
// Cancel from the subscriber from and says what the stage must do. For a
// new pass the outlet forgets the last one before it subscribes, so a
// stage begins its pass with the outlet already open: what it pushes then
// goes to the new epoch. An error breaks the protocol and changes nothing;
// the stage fails.
func (o *outlet) step(from *actor.PID, msg any) (outletEvent, error) {
	switch m := msg.(type) {
	case *messages.Subscribe:
		switch o.classify(m) {
		case staleSub:
			return outletIgnored, nil
		case resumeSub:
			return outletFlush, o.subscribe(from, m)
		}
		if m.From != 0 || m.Demand < 0 {
			// Checked before the outlet forgets the last pass: the stage,
			// which begins a pass only on outletBegin, would keep its
			// state of the last one. (Found by FuzzXMapMachine.)
			return outletIgnored, fmt.Errorf("%w: a new pass subscribed from %d with demand %d", ErrProtocol, m.From, m.Demand)
		}
		o.reset(m.Pass)
		return outletBegin, o.subscribe(from, m)
	case *messages.Demand:
		return outletFlush, o.onDemand(m)
	case *messages.Cancel:
		// Cancel is idempotent, and one of an old epoch is not this link's.
		if m.Epoch != o.epoch || o.closed {
			return outletIgnored, nil
		}
		o.closed = true
		return outletCancel, nil
	}
	return notOutlet, nil
}

// ack forgets the items below seq.
func (o *outlet) ack(seq uint64) {
	if seq <= o.base {
		return
	}
	n := int(min(seq, o.produced()) - o.base)
	clear(o.items[:n])
	o.items = o.items[n:]
	o.base += uint64(n)
}

// onDemand adds demand (additive, saturating) and takes the acknowledgement.
// Demand for an old epoch is ignored; a demand <= 0 is a protocol error.
func (o *outlet) onDemand(m *messages.Demand) error {
	if m.Epoch != o.epoch || o.idle {
		return nil
	}
	if m.N <= 0 {
		return fmt.Errorf("%w: demand %d on epoch %d", ErrProtocol, m.N, m.Epoch)
	}
	if m.Ack > o.sent {
		// Forgetting items not sent yet would leave the link nothing to
		// send them from (found by FuzzRelayMachine).
		return fmt.Errorf("%w: demand on epoch %d acknowledges %d items, but %d were sent", ErrProtocol, m.Epoch, m.Ack, o.sent)
	}
	if o.demand > math.MaxInt64-m.N {
		o.demand = math.MaxInt64
	} else {
		o.demand += m.N
	}
	o.ack(m.Ack)
	return nil
}

// flush sends what the subscriber demanded, then End or Failure once
// everything is sent.
func (o *outlet) flush(box *outbox) {
	if o.sub == nil || o.done || o.closed || o.idle {
		return
	}
	for o.demand > 0 && o.sent < o.produced() {
		b := o.items[o.sent-o.base]
		box.put(o.sub, &messages.Batch{Epoch: o.epoch, Seq: o.sent, Pass: b.Pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids,
			Source: b.Source, First: b.First, Count: b.Count, Skipped: b.Skipped, Position: b.Position, Positions: b.Positions, Padding: b.Padding, Run: b.Run, Cuts: b.Cuts, OrderPass: b.OrderPass})
		o.sent++
		o.demand--
	}
	if o.fail != nil {
		f := o.fail // a template: every epoch gets its own message
		box.put(o.sub, &messages.Failure{Epoch: o.epoch, Stage: f.Stage, File: f.File, Offset: f.Offset, Class: f.Class, Cause: f.Cause})
		o.done = true
	} else if o.end != nil && o.sent == o.produced() {
		box.put(o.sub, &messages.End{Epoch: o.epoch, Pass: o.end.Pass, Count: o.end.Count, Skipped: o.end.Skipped})
		o.done = true
	}
}

// inlet is the subscriber's half of a link. It takes items strictly in
// sequence order from the current epoch and keeps the publisher's demand
// topped up to its window, in steps of at least half of what the stage can
// take (see replenish) so that demand travels in few messages.
type inlet struct {
	pub         *actor.PID
	epoch       uint64
	pass        uint32
	next        uint64 // next sequence number expected
	outstanding int64  // demanded and not yet received
	window      int64
	// reach is the most room its stage ever reports (its capacity), when
	// that is less than the window; 0 means the window.
	reach int64
	ended bool
	open  bool // subscribed at least once
	// stride is how far the epoch moves on each subscription (0: 1): the
	// merge stage's links from its lanes take turns at epochs, so that an
	// item's epoch names its lane.
	stride uint64
	// lane is the lane of a stage that feeds several (a lane's first
	// stage after the deal stage), sent with every subscription.
	lane uint32
}

// step is the smallest top-up replenish sends: half of the most the link
// can have outstanding.
func (in *inlet) step() int64 {
	most := in.window
	if in.reach > 0 {
		most = min(most, in.reach)
	}
	return demandStep(most)
}

// demandStep is the smallest grant worth a message on a link that can have
// at most most items outstanding: half of them, at least 1. Every grant of
// demand in the pipeline waits for it (inlet.replenish, open_files' credit
// to its readers, a device's notices to its actor).
func demandStep[T int | int64](most T) T { return max(1, most/2) }

// subscribe opens the link again under a new epoch from sequence number
// from, granting up to room items at once.
func (in *inlet) subscribe(box *outbox, pass uint32, from uint64, room int) {
	in.epoch += max(in.stride, 1)
	in.pass, in.next, in.ended, in.open = pass, from, false, true
	in.outstanding = min(in.window, int64(max(room, 0)))
	box.put(in.pub, &messages.Subscribe{Epoch: in.epoch, Pass: pass, From: from, Demand: in.outstanding, Lane: in.lane})
}

// verdict says what to do with an arriving item.
type verdict int

const (
	take  verdict = iota // in order: use it
	stale                // an old epoch or a duplicate: drop it
	gap                  // an item is missing: drop it and subscribe again
)

// reopen subscribes again under a new epoch from the first item not taken
// in, if the link is open and its pass not over: after a restart (the
// dropped message may have been an item), or when the publisher restarted.
func (in *inlet) reopen(box *outbox, room int) {
	if in.open && !in.ended {
		in.subscribe(box, in.pass, in.next, room)
	}
}

// check sorts an arriving item by its epoch and sequence number, changing
// nothing: the item is counted by commit once it has been used, so an item
// whose handling panics is asked for again after the restart.
func (in *inlet) check(epoch, seq uint64) verdict {
	switch {
	case epoch != in.epoch || in.ended:
		return stale
	case seq < in.next:
		return stale
	case in.outstanding <= 0:
		// More than was demanded: a publisher that breaks the protocol.
		// Taking it would overdraw the credit; dropping it leaves a gap
		// that the next item shows, and the link is opened again there.
		return stale
	case seq > in.next:
		return gap
	}
	return take
}

// commit counts the item admit let in, once it has been used.
func (in *inlet) commit() {
	in.next++
	in.outstanding--
}

// admit decides on an arriving item: true to use it (then commit it);
// false when it is stale (dropped) or follows a gap (dropped, and the link
// is opened again from the first missing item).
func (in *inlet) admit(box *outbox, epoch, seq uint64, room int) bool {
	switch in.check(epoch, seq) {
	case take:
		return true
	case gap:
		in.subscribe(box, in.pass, in.next, room)
	}
	return false
}

// admitEnd decides on an arriving End: true when it closes the current
// epoch after exactly the items taken in. An End that says more items were
// sent than arrived opens the link again.
func (in *inlet) admitEnd(box *outbox, m *messages.End, room int) bool {
	if !in.current(m.Epoch) {
		return false
	}
	if m.Count != in.next {
		in.subscribe(box, in.pass, in.next, room)
		return false
	}
	return true
}

// cancel closes the link from this side, if it is open: the stage's own
// subscriber cancelled, so nothing more is wanted from upstream.
func (in *inlet) cancel(box *outbox) {
	if in.open && !in.ended {
		box.put(in.pub, &messages.Cancel{Epoch: in.epoch})
		in.ended = true
	}
}

// current says whether a control message (End, Failure) belongs to the
// current epoch.
func (in *inlet) current(epoch uint64) bool { return epoch == in.epoch && !in.ended }

// replenish tops the outstanding demand up to min(window, room), once the
// top-up is worth a message: at least step(). ack is the sequence number
// below which every item has been taken in for good.
//
// A smaller top-up waits, even with nothing outstanding, and the link
// cannot stall for it: a room less than step() is less than the stage's
// reach, so the stage holds items (unsent output, a queue) that its
// downstream takes, and every item taken calls replenish again, with more
// room. At the sink, a device's queue drains by itself. Upstream, this is
// what keeps a stage that is full by one item from asking for items one
// at a time: demand goes out in halves of the stage's room, as Reactive
// Streams' request(n) batching does.
func (in *inlet) replenish(box *outbox, room int, ack uint64) {
	if !in.open || in.ended {
		return
	}
	want := min(in.window, int64(max(room, 0))) - in.outstanding
	if want < in.step() { // step is at least 1
		return
	}
	in.outstanding += want
	box.put(in.pub, &messages.Demand{Epoch: in.epoch, N: want, Ack: ack})
}
