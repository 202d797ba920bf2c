package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// filesCell is what the open_files stage persists: which units of the pass
// are done, how many records of each it took in, which reader reads which
// unit, and its buffer of groups for the downstream stage.
//
// A unit is what one reader is assigned: a whole file, or, in an order
// (seq set), a piece of a file that the order's next window needs. Units
// are numbered in the order they are released downstream.
type filesCell struct {
	cell
	src     recordSource
	files   int
	workers []*actor.PID
	ordered bool // release units in their order (always in an order)
	// In the order: units plans the readers' work, and windows, when no
	// Shuffle stage follows to do it, assembles the items.
	units   *units
	windows *windows
	buffer  int // groups held unsent before readers get no more credit
	window  int // groups a reader may have in flight

	out      outlet
	pass     uint32
	epochs   uint64 // assignment epochs handed out, never reused
	nextUnit int
	base     int         // the unit of state[0]: units before are released
	state    []unitState // units base, base+1, ... known so far
	work     []workerState
	byEpoch  map[uint64]int            // assignment epoch -> unit, this pass
	pending  map[int][]*messages.Batch // ordered: groups of units after head
	head     int                       // ordered: the unit released next
	skipped  uint64
}

type unitState struct {
	file     int
	from, to uint64 // records [from, to) of the file; to 0: to its end
	accepted uint64 // the next record to take in (kept or sent)
	done     bool
	worker   int    // -1 unassigned
	pos      uint64 // in an order: the S position of record from
	run      int    // in an order: the run of windows the unit reads
}

type workerState struct {
	unit        int // -1 idle
	epoch       uint64
	outstanding int    // groups demanded, not yet received
	ack         uint64 // next group sequence number expected
}

// unit is unit u's state; u must be known (ready).
func (c *filesCell) unit(u int) *unitState { return &c.state[u-c.base] }

// ready reports whether unit u is known, asking the order for its next
// window's units when u is the first unit not yet known.
func (c *filesCell) ready(u int) bool {
	for u-c.base >= len(c.state) {
		if c.units == nil || !c.units.more(c) {
			return false
		}
	}
	return true
}

type filesActor struct{ c *filesCell }

func (a *filesActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() {
		demand := 0
		for _, w := range c.work {
			demand += w.outstanding
		}
		c.meter.gauge(c.out.held(), int64(demand))
	}()
	msg, send := c.receive(ctx)
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			// The dropped message may have been a group or an end: every
			// reader starts again from what was taken in.
			for w := range c.work {
				if c.work[w].unit >= 0 {
					a.assign(send, w, c.work[w].unit)
				}
			}
			c.announce(send)
		}
		return
	case *messages.Subscribe:
		switch c.out.classify(m) {
		case staleSub:
			return
		case freshSub:
			a.startPass(send, m.Pass)
		}
		if err := c.out.subscribe(ctx.Sender(), m); err != nil {
			a.fail(err)
		}
	case *messages.Demand:
		if err := c.out.onDemand(m); err != nil {
			a.fail(err)
		}
	case *messages.Cancel:
		if c.out.cancel(m) {
			a.stopReaders(send)
		}
		return
	case *messages.Resubscribe:
		for w, pid := range c.workers {
			if pid.Equal(ctx.Sender()) && c.work[w].unit >= 0 {
				a.assign(send, w, c.work[w].unit)
			}
		}
	case *messages.Batch:
		a.onGroup(m)
	case *messages.End:
		a.onEnd(send, m)
	case *messages.Failure:
		if u, ok := c.byEpoch[m.Epoch]; ok && u >= c.base && c.unit(u).worker >= 0 && c.work[c.unit(u).worker].epoch == m.Epoch {
			c.out.fail = m
			a.stopReaders(send)
		}
	default:
		return
	}
	a.settle(send)
}

// settle sends the subscriber what it asked for, then grants the readers
// what that freed. In this order: what flush sends leaves the buffer, and
// credit must see that room now. No message may come to prompt it later:
// the subscriber may be waiting for groups it already asked for, with
// nothing left to ask (inlet.replenish waits for a step of half its reach).
func (a *filesActor) settle(send func(*actor.PID, any)) {
	a.c.out.flush(send)
	a.credit(send)
}

// startPass forgets the last pass and hands the first units to the readers.
func (a *filesActor) startPass(send func(*actor.PID, any), pass uint32) {
	c := a.c
	a.stopReaders(send)
	c.out.reset(pass)
	c.pass, c.nextUnit, c.head, c.base, c.skipped = pass, 0, 0, 0, 0
	c.state = c.state[:0]
	if c.units != nil {
		c.units.begin(pass)
		if c.windows != nil {
			c.windows.begin(pass)
		}
	} else {
		for f := range c.files {
			c.state = append(c.state, unitState{file: f, worker: -1})
		}
	}
	c.work = make([]workerState, len(c.workers))
	for w := range c.work {
		c.work[w].unit = -1
	}
	c.byEpoch = map[uint64]int{}
	c.pending = map[int][]*messages.Batch{}
	for w := range c.workers {
		a.next(send, w)
	}
	a.maybeEnd() // an order may deal this rank nothing
}

// stopReaders cancels every assignment.
func (a *filesActor) stopReaders(send func(*actor.PID, any)) {
	c := a.c
	for w := range c.work {
		if c.work[w].unit >= 0 {
			send(c.workers[w], &messages.Cancel{Epoch: c.work[w].epoch})
			c.work[w].unit = -1
		}
	}
}

// next gives reader w the next unit of the pass, if any is left.
func (a *filesActor) next(send func(*actor.PID, any), w int) {
	c := a.c
	c.work[w].unit = -1
	if c.out.fail != nil || !c.ready(c.nextUnit) {
		return
	}
	u := c.nextUnit
	c.nextUnit++
	c.unit(u).worker = w
	a.assign(send, w, u)
}

// assign (re)opens reader w on unit u under a new epoch, from the first
// record not yet taken in.
func (a *filesActor) assign(send func(*actor.PID, any), w, u int) {
	c := a.c
	st := c.unit(u)
	c.epochs++
	c.work[w] = workerState{unit: u, epoch: c.epochs}
	c.byEpoch[c.epochs] = u
	send(c.workers[w], &messages.Assign{Epoch: c.epochs, Pass: c.pass, File: uint32(st.file), Path: c.src.Name(st.file),
		From: st.accepted, To: st.to})
}

// onGroup takes in a group from a reader: from the reader's current epoch,
// or from an earlier one of the same unit, as long as it starts exactly at
// the first record not yet taken in. Anything else is a duplicate or stale.
func (a *filesActor) onGroup(b *messages.Batch) {
	c := a.c
	u, ok := c.byEpoch[b.Epoch]
	if !ok || u < c.base {
		return
	}
	st := c.unit(u)
	if w := st.worker; w >= 0 && c.work[w].epoch == b.Epoch {
		// Whatever it holds, a group of the current epoch used up demand
		// and is acknowledged.
		c.work[w].outstanding--
		c.work[w].ack = b.Seq + 1
	}
	if st.done || b.First != st.accepted || uint32(st.file) != b.Source {
		return
	}
	st.accepted += b.Count
	c.skipped += b.Skipped
	if len(b.Ids) == 0 && c.units == nil {
		return // only skipped records; an order counts their positions
	}
	item := &messages.Batch{Pass: c.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids, First: b.First, Count: b.Count}
	if c.ordered && u != c.head {
		c.pending[u] = append(c.pending[u], item)
		return
	}
	a.release(u, item)
}

// release hands a unit's group on: downstream, or into the order's window.
func (a *filesActor) release(u int, item *messages.Batch) {
	c := a.c
	if c.units == nil {
		a.push(item)
		return
	}
	place(c.unit(u), item)
	if c.windows == nil {
		a.push(item) // for the Shuffle stage after
		return
	}
	out, err := c.windows.take(item, false)
	if err != nil {
		a.fail(err)
		return
	}
	for _, item := range out {
		a.push(item)
	}
}

func (a *filesActor) push(item *messages.Batch) {
	c := a.c
	c.out.push(item)
	c.meter.items.Add(1)
	c.pipe.noteProduced(c.kind, item)
}

// onEnd marks a unit done once every record it had was taken in, and moves
// the unit's reader on to the next unit. The End may come from an earlier
// epoch of the unit (the coordinator restarted and reassigned the unit while
// the old reader's groups and End were still in its mailbox): the reader is
// then still on the unit under the new epoch and must be moved on all the
// same, or no End of the new epoch would ever do it.
func (a *filesActor) onEnd(send func(*actor.PID, any), e *messages.End) {
	c := a.c
	u, ok := c.byEpoch[e.Epoch]
	if !ok || u < c.base {
		return
	}
	st := c.unit(u)
	if !st.done && e.Count == st.accepted {
		st.done = true
		w := st.worker
		a.advanceHead()
		a.maybeEnd()
		if w >= 0 && c.work[w].unit == u {
			a.next(send, w)
		}
		return
	}
	if w := st.worker; st.done && w >= 0 && c.work[w].unit == u {
		a.next(send, w)
	}
}

// advanceHead releases, in ordered mode, the groups of the units after
// those that are done; in an order, a window whose units are all released
// is permuted and handed on, and the released units are forgotten.
func (a *filesActor) advanceHead() {
	c := a.c
	if !c.ordered {
		return
	}
	for c.ready(c.head) && c.unit(c.head).done {
		c.head++
		if c.ready(c.head) {
			for _, item := range c.pending[c.head] {
				a.release(c.head, item)
			}
			delete(c.pending, c.head)
		}
	}
	if c.units != nil && c.head > c.base && c.head <= c.nextUnit {
		n := c.head - c.base // released units: nothing refers to them
		c.state = c.state[:copy(c.state, c.state[n:])]
		c.base = c.head
	}
}

func (a *filesActor) maybeEnd() {
	c := a.c
	if c.out.end != nil || c.out.fail != nil {
		return
	}
	if c.units != nil {
		if c.ready(c.head) {
			return
		}
		if c.windows != nil {
			out, err := c.windows.finish()
			if err != nil {
				a.fail(err)
				return
			}
			for _, item := range out {
				a.push(item)
			}
		}
	} else {
		for _, st := range c.state {
			if !st.done {
				return
			}
		}
	}
	c.out.end = &messages.End{Pass: c.pass, Count: c.out.produced(), Skipped: c.skipped}
}

// credit grants readers demand: each at most window groups in flight, and
// all of them together no more than the buffer has room for. In ordered
// mode a reader ahead of the head unit may run at most window groups ahead.
func (a *filesActor) credit(send func(*actor.PID, any)) {
	c := a.c
	if c.out.fail != nil || c.out.closed {
		return
	}
	budget := c.buffer - c.out.unsent()
	for w := range c.work {
		if u := c.work[w].unit; u >= 0 && (!c.ordered || u == c.head) {
			budget -= c.work[w].outstanding
		}
	}
	step := demandStep(min(c.window, c.buffer))
	for w := range c.work {
		ws := &c.work[w]
		if ws.unit < 0 {
			continue
		}
		want := c.window - ws.outstanding
		if c.ordered && ws.unit != c.head {
			want -= len(c.pending[ws.unit])
		} else {
			want = min(want, budget)
		}
		// In steps of half of what a reader may have in flight, as
		// inlet.replenish and for the same reason; a smaller grant waits
		// for groups to arrive or leave the buffer, which calls credit
		// again.
		if want < step { // step is at least 1
			continue
		}
		if !c.ordered || ws.unit == c.head {
			budget -= want
		}
		ws.outstanding += want
		send(c.workers[w], &messages.Demand{Epoch: ws.epoch, N: int64(want), Ack: ws.ack})
	}
}

func (a *filesActor) fail(err error) {
	c := a.c
	c.pipe.record(c.name, err)
	c.out.fail = failure(c.name, "", -1, err)
}
