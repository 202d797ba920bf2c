package protocol

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// FilesMachine is the open_files stage's protocol: which units of the pass
// are done, how many records of each it took in, which reader reads which
// unit, and its buffer of groups for the downstream stage.
//
// A unit is what one reader is assigned: a whole file, or, in an order
// (seq set), a piece of a file that the order's next window needs. Units
// are numbered in the order they are released downstream. actors.machineActor
// runs it.
type FilesMachine struct {
	Name    string
	Src     FileNames
	Files   int
	Workers []*actor.PID
	Ordered bool // release units in their order (always in an order)
	// In the order: units plans the readers' work, and windows, when no
	// Shuffle stage follows to do it, assembles the items.
	Units   *Units
	Windows *Windows
	Buffer  int // groups held unsent before readers get no more credit
	Window  int // groups a reader may have in flight

	out      Outlet
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
	failed   error // what failed the stage in this step, for the runner
	Effects  Effects
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
func (c *FilesMachine) unit(u int) *unitState { return &c.state[u-c.base] }

// ready reports whether unit u is known, asking the order for its next
// window's units when u is the first unit not yet known.
func (c *FilesMachine) ready(u int) bool {
	for u-c.base >= len(c.state) {
		if c.Units == nil || !c.Units.more(c) {
			return false
		}
	}
	return true
}

func (c *FilesMachine) Restarted(box *Outbox) {
	// The dropped message may have been a group or an end: every reader
	// starts again from what was taken in.
	for w := range c.work {
		if c.work[w].unit >= 0 {
			c.assign(box, w, c.work[w].unit)
		}
	}
}

func (c *FilesMachine) Load() (int, int64) {
	demand := 0
	for _, w := range c.work {
		demand += w.outstanding
	}
	return c.out.Held(), int64(demand)
}

func (c *FilesMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	switch m := msg.(type) {
	case *messages.Subscribe, *messages.Demand, *messages.Cancel:
		ev, err := c.out.Step(from, m)
		switch {
		case err != nil:
			c.fail(err)
		case ev == OutletBegin:
			c.startPass(box, c.out.Pass)
		case ev == OutletCancel:
			c.stopReaders(box)
			return nil
		}
	case *messages.Resubscribe:
		for w, pid := range c.Workers {
			// Before the first pass, no reader has work (it panicked).
			if w < len(c.work) && pid.Equal(from) && c.work[w].unit >= 0 {
				c.assign(box, w, c.work[w].unit)
			}
		}
	case *messages.Batch:
		c.onGroup(m)
	case *messages.End:
		c.onEnd(box, m)
	case *messages.Failure:
		if u, ok := c.byEpoch[m.Epoch]; ok && u >= c.base && c.unit(u).worker >= 0 && c.work[c.unit(u).worker].epoch == m.Epoch {
			c.out.Fail = m
			c.stopReaders(box)
		}
	default:
		return nil
	}
	c.settle(box)
	err := c.failed
	c.failed = nil
	return err
}

// settle sends the subscriber what it asked for, then grants the readers
// what that freed. In this order: what flush sends leaves the buffer, and
// credit must see that room now. No message may come to prompt it later:
// the subscriber may be waiting for groups it already asked for, with
// nothing left to ask (Inlet.Replenish waits for a step of half its reach).
func (c *FilesMachine) settle(box *Outbox) {
	c.out.Flush(box)
	c.credit(box)
}

// startPass forgets the last pass and hands the first units to the
// readers; the outlet has begun the pass (Outlet.Step).
func (c *FilesMachine) startPass(box *Outbox, pass uint32) {
	c.stopReaders(box)
	c.pass, c.nextUnit, c.head, c.base, c.skipped = pass, 0, 0, 0, 0
	c.state = c.state[:0]
	if c.Units != nil {
		c.Units.begin(pass)
		if c.Windows != nil {
			c.Windows.begin(pass)
		}
	} else {
		for f := range c.Files {
			c.state = append(c.state, unitState{file: f, worker: -1})
		}
	}
	c.work = make([]workerState, len(c.Workers))
	for w := range c.work {
		c.work[w].unit = -1
	}
	c.byEpoch = map[uint64]int{}
	c.pending = map[int][]*messages.Batch{}
	for w := range c.Workers {
		c.next(box, w)
	}
	c.maybeEnd() // an order may deal this rank nothing
}

// stopReaders cancels every assignment.
func (c *FilesMachine) stopReaders(box *Outbox) {
	for w := range c.work {
		if c.work[w].unit >= 0 {
			box.Put(c.Workers[w], &messages.Cancel{Epoch: c.work[w].epoch})
			c.work[w].unit = -1
		}
	}
}

// next gives reader w the next unit of the pass, if any is left.
func (c *FilesMachine) next(box *Outbox, w int) {
	c.work[w].unit = -1
	if c.out.Fail != nil || !c.ready(c.nextUnit) {
		return
	}
	u := c.nextUnit
	c.nextUnit++
	c.unit(u).worker = w
	c.assign(box, w, u)
}

// assign (re)opens reader w on unit u under a new epoch, from the first
// record not yet taken in.
func (c *FilesMachine) assign(box *Outbox, w, u int) {
	st := c.unit(u)
	c.epochs++
	c.work[w] = workerState{unit: u, epoch: c.epochs}
	c.byEpoch[c.epochs] = u
	box.Put(c.Workers[w], &messages.Assign{Epoch: c.epochs, Pass: c.pass, File: uint32(st.file), Path: c.Src.Name(st.file),
		From: st.accepted, To: st.to})
}

// onGroup takes in a group from a reader: from the reader's current epoch,
// or from an earlier one of the same unit, as long as it starts exactly at
// the first record not yet taken in. Anything else is a duplicate or stale.
func (c *FilesMachine) onGroup(b *messages.Batch) {
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
	if len(b.Ids) == 0 && c.Units == nil {
		return // only skipped records; an order counts their positions
	}
	item := &messages.Batch{Pass: c.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids, First: b.First, Count: b.Count}
	if c.Ordered && u != c.head {
		c.pending[u] = append(c.pending[u], item)
		return
	}
	c.release(u, item)
}

// release hands a unit's group on: downstream, or into the order's window.
func (c *FilesMachine) release(u int, item *messages.Batch) {
	if c.Units == nil {
		c.push(item)
		return
	}
	place(c.unit(u), item)
	if c.Windows == nil {
		c.push(item) // for the Shuffle stage after
		return
	}
	out, err := c.Windows.take(item, false)
	if err != nil {
		c.fail(err)
		return
	}
	for _, item := range out {
		c.push(item)
	}
}

func (c *FilesMachine) push(item *messages.Batch) {
	c.out.Push(item)
	c.Effects.made(item)
}

// onEnd marks a unit done once every record it had was taken in, and moves
// the unit's reader on to the next unit. The End may come from an earlier
// epoch of the unit (the coordinator restarted and reassigned the unit while
// the old reader's groups and End were still in its mailbox): the reader is
// then still on the unit under the new epoch and must be moved on all the
// same, or no End of the new epoch would ever do it.
func (c *FilesMachine) onEnd(box *Outbox, e *messages.End) {
	u, ok := c.byEpoch[e.Epoch]
	if !ok || u < c.base {
		return
	}
	st := c.unit(u)
	if !st.done && e.Count == st.accepted {
		st.done = true
		w := st.worker
		c.advanceHead()
		c.maybeEnd()
		if w >= 0 && c.work[w].unit == u {
			c.next(box, w)
		}
		return
	}
	if w := st.worker; st.done && w >= 0 && c.work[w].unit == u {
		c.next(box, w)
	}
}

// advanceHead releases, in ordered mode, the groups of the units after
// those that are done; in an order, a window whose units are all released
// is permuted and handed on, and the released units are forgotten.
func (c *FilesMachine) advanceHead() {
	if !c.Ordered {
		return
	}
	for c.ready(c.head) && c.unit(c.head).done {
		c.head++
		if c.ready(c.head) {
			for _, item := range c.pending[c.head] {
				c.release(c.head, item)
			}
			delete(c.pending, c.head)
		}
	}
	if c.Units != nil && c.head > c.base && c.head <= c.nextUnit {
		n := c.head - c.base // released units: nothing refers to them
		c.state = c.state[:copy(c.state, c.state[n:])]
		c.base = c.head
	}
}

func (c *FilesMachine) maybeEnd() {
	if c.out.End != nil || c.out.Fail != nil {
		return
	}
	if c.Units != nil {
		if c.ready(c.head) {
			return
		}
		if c.Windows != nil {
			out, err := c.Windows.finish()
			if err != nil {
				c.fail(err)
				return
			}
			for _, item := range out {
				c.push(item)
			}
		}
	} else {
		for _, st := range c.state {
			if !st.done {
				return
			}
		}
	}
	c.out.End = &messages.End{Pass: c.pass, Count: c.out.Produced(), Skipped: c.skipped}
}

// credit grants readers demand: each at most window groups in flight, and
// all of them together no more than the buffer has room for. In ordered
// mode a reader ahead of the head unit may run at most window groups ahead.
func (c *FilesMachine) credit(box *Outbox) {
	if c.out.Fail != nil || c.out.Closed {
		return
	}
	budget := c.Buffer - c.out.Unsent()
	for w := range c.work {
		if u := c.work[w].unit; u >= 0 && (!c.Ordered || u == c.head) {
			budget -= c.work[w].outstanding
		}
	}
	step := DemandStep(min(c.Window, c.Buffer))
	for w := range c.work {
		ws := &c.work[w]
		if ws.unit < 0 {
			continue
		}
		want := c.Window - ws.outstanding
		if c.Ordered && ws.unit != c.head {
			want -= len(c.pending[ws.unit])
		} else {
			want = min(want, budget)
		}
		// In steps of half of what a reader may have in flight, as
		// Inlet.Replenish and for the same reason; a smaller grant waits
		// for groups to arrive or leave the buffer, which calls credit
		// again.
		if want < step { // step is at least 1
			continue
		}
		if !c.Ordered || ws.unit == c.head {
			budget -= want
		}
		ws.outstanding += want
		box.Put(c.Workers[w], &messages.Demand{Epoch: ws.epoch, N: int64(want), Ack: ws.ack})
	}
}

func (c *FilesMachine) fail(err error) {
	c.failed = err
	c.out.Fail = Failure(c.Name, "", -1, err)
}

// FileNames names the files open_files assigns, in its messages to readers.
type FileNames interface{ Name(file int) string }
