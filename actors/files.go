package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// filesCell is what the open_files stage persists: which files of the pass
// are done, how many records of each it took in, which reader reads which
// file, and its buffer of groups for the downstream stage.
type filesCell struct {
	cell
	src     recordSource
	files   int
	workers []*actor.PID
	ordered bool
	buffer  int // groups held unsent before readers get no more credit
	window  int // groups a reader may have in flight

	out      outlet
	pass     uint32
	running  bool
	epochs   uint64 // assignment epochs handed out, never reused
	nextFile int
	state    []fileState
	work     []workerState
	byEpoch  map[uint64]int            // assignment epoch -> file, this pass
	pending  map[int][]*messages.Batch // ordered: groups of files after head
	head     int                       // ordered: the file released next
	skipped  uint64
}

type fileState struct {
	accepted uint64 // records taken in (kept or sent)
	done     bool
	worker   int // -1 unassigned
}

type workerState struct {
	file        int // -1 idle
	epoch       uint64
	outstanding int    // groups demanded, not yet received
	ack         uint64 // next group sequence number expected
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
				if c.work[w].file >= 0 {
					a.assign(send, w, c.work[w].file)
				}
			}
			c.announce(send)
		}
		return
	case *messages.Subscribe:
		if c.out.sub != nil && m.Epoch <= c.out.epoch {
			return
		}
		if !c.running || m.Pass != c.pass {
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
		if m.Epoch == c.out.epoch && !c.out.closed {
			c.out.closed = true
			a.stopReaders(send)
		}
		return
	case *messages.Resubscribe:
		for w, pid := range c.workers {
			if pid.Equal(ctx.Sender()) && c.work[w].file >= 0 {
				a.assign(send, w, c.work[w].file)
			}
		}
	case *messages.Batch:
		a.onGroup(m)
	case *messages.End:
		a.onEnd(send, m)
	case *messages.Failure:
		if f, ok := c.byEpoch[m.Epoch]; ok && c.state[f].worker >= 0 && c.work[c.state[f].worker].epoch == m.Epoch {
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

// startPass forgets the last pass and hands the first files to the readers.
func (a *filesActor) startPass(send func(*actor.PID, any), pass uint32) {
	c := a.c
	a.stopReaders(send)
	c.out.reset(pass)
	c.pass, c.running, c.nextFile, c.head, c.skipped = pass, true, 0, 0, 0
	c.state = make([]fileState, c.files)
	for f := range c.state {
		c.state[f].worker = -1
	}
	c.work = make([]workerState, len(c.workers))
	for w := range c.work {
		c.work[w].file = -1
	}
	c.byEpoch = map[uint64]int{}
	c.pending = map[int][]*messages.Batch{}
	for w := range c.workers {
		a.next(send, w)
	}
}

// stopReaders cancels every assignment.
func (a *filesActor) stopReaders(send func(*actor.PID, any)) {
	c := a.c
	for w := range c.work {
		if c.work[w].file >= 0 {
			send(c.workers[w], &messages.Cancel{Epoch: c.work[w].epoch})
			c.work[w].file = -1
		}
	}
}

// next gives reader w the next file of the pass, if any is left.
func (a *filesActor) next(send func(*actor.PID, any), w int) {
	c := a.c
	c.work[w].file = -1
	if c.nextFile >= c.files || c.out.fail != nil {
		return
	}
	f := c.nextFile
	c.nextFile++
	c.state[f].worker = w
	a.assign(send, w, f)
}

// assign (re)opens reader w on file f under a new epoch, from the first
// record not yet taken in.
func (a *filesActor) assign(send func(*actor.PID, any), w, f int) {
	c := a.c
	c.epochs++
	c.work[w] = workerState{file: f, epoch: c.epochs}
	c.byEpoch[c.epochs] = f
	send(c.workers[w], &messages.Assign{Epoch: c.epochs, Pass: c.pass, File: uint32(f), Path: c.src.Name(f), From: c.state[f].accepted})
}

// onGroup takes in a group from a reader: from the reader's current epoch,
// or from an earlier one of the same file, as long as it starts exactly at
// the first record not yet taken in. Anything else is a duplicate or stale.
func (a *filesActor) onGroup(b *messages.Batch) {
	c := a.c
	f, ok := c.byEpoch[b.Epoch]
	if !ok {
		return
	}
	st := &c.state[f]
	if w := st.worker; w >= 0 && c.work[w].epoch == b.Epoch {
		// Whatever it holds, a group of the current epoch used up demand
		// and is acknowledged.
		c.work[w].outstanding--
		c.work[w].ack = b.Seq + 1
	}
	if st.done || b.First != st.accepted || uint32(f) != b.Source {
		return
	}
	st.accepted += b.Count
	c.skipped += b.Skipped
	if len(b.Ids) == 0 {
		return // only skipped records
	}
	item := &messages.Batch{Pass: c.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}
	if c.ordered && f != c.head {
		c.pending[f] = append(c.pending[f], item)
		return
	}
	c.out.push(item)
	c.meter.items.Add(1)
	c.pipe.noteProduced(c.kind, item)
}

// onEnd marks a file done once every record it had was taken in, and moves
// the file's reader on to the next file. The End may come from an earlier
// epoch of the file (the coordinator restarted and reassigned the file while
// the old reader's groups and End were still in its mailbox): the reader is
// then still on the file under the new epoch and must be moved on all the
// same, or no End of the new epoch would ever do it.
func (a *filesActor) onEnd(send func(*actor.PID, any), e *messages.End) {
	c := a.c
	f, ok := c.byEpoch[e.Epoch]
	if !ok {
		return
	}
	st := &c.state[f]
	if !st.done && e.Count == st.accepted {
		st.done = true
		a.advanceHead()
		a.maybeEnd()
	}
	if w := st.worker; st.done && w >= 0 && c.work[w].file == f {
		a.next(send, w)
	}
}

// advanceHead releases, in ordered mode, the groups of the files after
// those that are done.
func (a *filesActor) advanceHead() {
	c := a.c
	if c.ordered {
		for c.head < c.files && c.state[c.head].done {
			c.head++
			if c.head < c.files {
				for _, item := range c.pending[c.head] {
					c.out.push(item)
					c.meter.items.Add(1)
					c.pipe.noteProduced(c.kind, item)
				}
				delete(c.pending, c.head)
			}
		}
	}
}

func (a *filesActor) maybeEnd() {
	c := a.c
	for _, st := range c.state {
		if !st.done {
			return
		}
	}
	if c.out.end == nil && c.out.fail == nil {
		c.out.end = &messages.End{Pass: c.pass, Count: c.out.produced(), Skipped: c.skipped}
	}
}

// credit grants readers demand: each at most window groups in flight, and
// all of them together no more than the buffer has room for. In ordered
// mode a reader ahead of the head file may run at most window groups ahead.
func (a *filesActor) credit(send func(*actor.PID, any)) {
	c := a.c
	if c.out.fail != nil || c.out.closed {
		return
	}
	budget := c.buffer - c.out.unsent()
	for w := range c.work {
		if f := c.work[w].file; f >= 0 && (!c.ordered || f == c.head) {
			budget -= c.work[w].outstanding
		}
	}
	step := demandStep(min(c.window, c.buffer))
	for w := range c.work {
		ws := &c.work[w]
		if ws.file < 0 {
			continue
		}
		want := c.window - ws.outstanding
		if c.ordered && ws.file != c.head {
			want -= len(c.pending[ws.file])
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
		if !c.ordered || ws.file == c.head {
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
