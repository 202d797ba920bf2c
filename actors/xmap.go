package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// xmapCell is what an xmap stage persists. Items are taken in from the
// upstream link in order and handed to the stage's workers; an item stays
// in the cell (inflight) until its result arrives, so a restart, which
// loses the work in flight with the old workers, hands those items to the
// new workers again. base is the first item whose result has not been
// pushed downstream.
type xmapCell struct {
	cell
	relay
	fn      MapFunc
	workers int
	limit   int // items between intake and push: workers + buffer
	ordered bool

	run      uint64 // incarnation of the worker pool: results of others are dropped
	base     uint64
	inflight map[uint64]*messages.Batch // items handed to workers, without a result yet
	waiting  map[uint64]*mapped         // ordered: results kept until their turn
	pushed   map[uint64]bool            // unordered: results above base already pushed
	drained  bool                       // the upstream's End was taken in
}

// job is one item for a worker.
type job struct {
	run, seq uint64
	item     *messages.Batch
}

// mapped is a worker's result, sent to the stage's actor.
type mapped struct {
	run, seq uint64
	item     *messages.Batch
	err      error
	panic    any // the function panicked: the stage restarts
}

// xmapActor is one incarnation of an xmap stage: it owns the worker
// goroutines, which it starts when it starts (or a pass begins) and cancels
// and joins when it stops or restarts.
type xmapActor struct {
	c        *xmapCell
	jobs     chan job
	cancel   context.CancelFunc
	finished chan struct{} // a signal per worker that returned
}

func newXMapCell(pipe *shared, name string, s XMap, capacity, window int) *xmapCell {
	c := &xmapCell{cell: cell{name: name, kind: KindXMap, pipe: pipe}, relay: relay{name: name, capacity: capacity},
		fn: s.Fn, workers: s.Workers, limit: s.Workers + s.Buffer, ordered: s.Ordered}
	c.in.window = int64(max(window, c.limit))
	c.in.reach = int64(min(c.limit, capacity))
	return c
}

func (a *xmapActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() { c.meter.gauge(c.out.held(), c.in.outstanding) }()
	msg, box := c.receive(ctx)
	defer c.post()
	switch m := msg.(type) {
	case *actor.Started:
		a.start(ctx)
		if c.restarted() {
			// The work in flight died with the old workers: hand its items
			// to the new ones. The dropped message may have been an item or
			// demand: open the links again.
			for _, seq := range slices.Sorted(maps.Keys(c.inflight)) {
				a.jobs <- job{run: c.run, seq: seq, item: c.inflight[seq]}
			}
			c.in.reopen(box, a.room())
			c.announce(box)
		}
		return
	case *actor.Stopping, *actor.Restarting:
		a.stop()
		return
	case *mapped:
		if m.run != c.run {
			return // from an earlier incarnation or pass
		}
		if m.panic != nil {
			panic(m.panic)
		}
		if !a.onResult(box, m) {
			return
		}
	default:
		begin := func(pass uint32) uint32 {
			a.stop()
			c.base, c.drained = 0, false
			c.inflight, c.waiting, c.pushed = map[uint64]*messages.Batch{}, map[uint64]*mapped{}, map[uint64]bool{}
			a.start(ctx)
			return pass
		}
		res, err := c.onLink(box, ctx.Sender(), msg, a.room(), begin)
		switch {
		case err != nil:
			c.pipe.record(c.cell.name, err)
			return
		case res == handled, res == notLink && !a.onItem(box, msg):
			return
		}
	}
	a.maybeEnd()
	c.out.flush(box)
	c.in.replenish(box, a.room(), c.in.next)
}

// onItem takes in an item, handing it to a worker, or the upstream's End.
func (a *xmapActor) onItem(box *outbox, msg any) bool {
	c := a.c
	switch m := msg.(type) {
	case *messages.Batch:
		if !c.in.admit(box, m.Epoch, m.Seq, a.room()) {
			return false
		}
		a.jobs <- job{run: c.run, seq: m.Seq, item: m} // never blocks: see room
		c.inflight[m.Seq] = m
		c.in.commit()
	case *messages.End:
		if !c.in.admitEnd(box, m, a.room()) {
			return false
		}
		if c.drained {
			// The End again: the upstream restarted before the last
			// results were pushed, the link was opened again (the inlet
			// ends only then, in maybeEnd) and the End replayed. Its
			// skipped records were counted the first time.
			return false
		}
		c.skipped += m.Skipped
		c.drained = true
	default:
		return false
	}
	return true
}

// onResult pushes a result: in order (ordered) or at once.
func (a *xmapActor) onResult(box *outbox, m *mapped) bool {
	c := a.c
	if c.inflight[m.seq] == nil {
		return false // not asked for (cannot happen: results of old runs are dropped)
	}
	delete(c.inflight, m.seq)
	if !c.ordered {
		if m.err != nil {
			a.fail(box, m.err)
			return false
		}
		a.push(m.item)
		c.pushed[m.seq] = true
		for c.pushed[c.base] {
			delete(c.pushed, c.base)
			c.base++
		}
		return true
	}
	c.waiting[m.seq] = m
	for r := c.waiting[c.base]; r != nil; r = c.waiting[c.base] {
		if r.err != nil {
			a.fail(box, r.err)
			return false
		}
		a.push(r.item)
		delete(c.waiting, c.base)
		c.base++
	}
	return true
}

// fail ends the downstream link with err, and the pipeline with it.
func (a *xmapActor) fail(box *outbox, err error) {
	a.c.pipe.record(a.c.cell.name, err)
	a.c.relay.fail(box, err)
}

func (a *xmapActor) push(b *messages.Batch) {
	a.c.out.push(b)
	a.c.meter.items.Add(1)
	a.c.pipe.noteProduced(a.c.kind, b)
}

// maybeEnd ends the pass downstream once the upstream ended and every
// result is pushed.
func (a *xmapActor) maybeEnd() {
	c := a.c
	if c.drained && !c.in.ended && c.base == c.in.next {
		c.in.ended = true
		c.out.end = &messages.End{Pass: c.out.pass, Count: c.out.produced(), Skipped: c.skipped}
	}
}

// room is how many more items the stage should ask for: no more than the
// workers and their buffer can hold, so handing an item to them never
// blocks, and none while the produced items pile up unsent.
func (a *xmapActor) room() int {
	c := a.c
	if c.drained {
		return 0
	}
	return min(c.limit-int(c.in.next-c.base), c.capacity-c.out.unsent())
}

// start begins a new incarnation of the worker pool.
func (a *xmapActor) start(ctx actor.Context) {
	c := a.c
	c.run++
	if c.waiting == nil {
		c.inflight, c.waiting, c.pushed = map[uint64]*messages.Batch{}, map[uint64]*mapped{}, map[uint64]bool{}
	}
	jobs, finished := make(chan job, c.limit), make(chan struct{}, c.workers)
	a.jobs, a.finished = jobs, finished
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	self, root, pass := ctx.Self(), ctx.ActorSystem().Root, c.out.pass
	// The workers hold this incarnation's channels, not the actor's fields:
	// a worker abandoned by stop never takes a later incarnation's job.
	for range c.workers {
		go func() {
			defer func() { finished <- struct{}{} }()
			for {
				select {
				case j := <-jobs:
					root.Send(self, a.work(j, pass))
				case <-rctx.Done():
					return
				}
			}
		}()
	}
}

// work runs the function on one item, catching a panic.
func (a *xmapActor) work(j job, pass uint32) (m *mapped) {
	m = &mapped{run: j.run, seq: j.seq}
	defer func() {
		if r := recover(); r != nil {
			m.item, m.err, m.panic = nil, nil, fmt.Sprintf("xmap function: %v", r)
		}
	}()
	m.item, m.err = apply(a.c.fn, pass, j.item)
	return m
}

// stop cancels the workers and waits for them: a worker finishes the item
// it is on first. A function that does not return within
// Options.StopGrace is abandoned (Close reports it): its result carries an
// old run number, so it is never used.
func (a *xmapActor) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	if !join(a.finished, a.c.workers, a.c.pipe.opts.StopGrace) {
		a.c.pipe.abandon(fmt.Sprintf("stage %s's function", a.c.cell.name))
	}
}
