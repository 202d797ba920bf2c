package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// xmapMachine is the xmap stage's protocol: the relay's links, the items
// handed to the workers and not yet back (inflight), results kept for their
// turn (ordered), and the end of a pass once every result is pushed. An
// item stays inflight until its result arrives, so a restart, which loses
// the work in flight with the old workers, hands those items to the new
// ones. base is the first item whose result has not been pushed. Its steps
// put what to send in the outbox and what the workers must compute in
// jobs; xmapActor owns the workers.
type xmapMachine struct {
	relay
	limit   int // items between intake and push: workers + buffer
	ordered bool

	run      uint64 // incarnation of the worker pool: results of others are dropped
	base     uint64
	inflight map[uint64]*messages.Batch // items handed to workers, without a result yet
	waiting  map[uint64]*mapped         // ordered: results kept until their turn
	pushed   map[uint64]bool            // unordered: results above base already pushed
	drained  bool                       // the upstream's End was taken in
	jobs     []job                      // for the workers, once the step is over
	fx       effects
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
	dropped  int // samples the function could not read, dropped (apply)
	err      error
	panic    any // the function panicked: the stage restarts
}

func newXMapMachine(name string, s XMap, capacity, window int) *xmapMachine {
	m := &xmapMachine{relay: relay{name: name, capacity: capacity}, limit: s.Workers + s.Buffer, ordered: s.Ordered}
	m.in.window = int64(max(window, m.limit))
	m.in.reach = int64(min(m.limit, capacity))
	m.forget()
	return m
}

// forget drops what the workers were given of the pass.
func (m *xmapMachine) forget() {
	m.base, m.drained = 0, false
	m.inflight, m.waiting, m.pushed = map[uint64]*messages.Batch{}, map[uint64]*mapped{}, map[uint64]bool{}
}

// restarted begins a new incarnation of the workers: the work in flight
// died with the old ones, so its items go to the new ones. The dropped
// message may have been an item or demand: the links open again.
func (m *xmapMachine) restarted(box *outbox) {
	m.run++
	for _, seq := range slices.Sorted(maps.Keys(m.inflight)) {
		m.jobs = append(m.jobs, job{run: m.run, seq: seq, item: m.inflight[seq]})
	}
	m.in.reopen(box, m.room())
}

func (m *xmapMachine) load() (int, int64) { return m.out.held(), m.in.outstanding }

// step takes a link message or a worker's result. A new pass begins a new
// incarnation of the workers (run).
func (m *xmapMachine) step(box *outbox, from *actor.PID, msg any) error {
	if r, ok := msg.(*mapped); ok {
		if r.run != m.run {
			return nil // from an earlier incarnation or pass
		}
		if ok, err := m.onResult(box, r); !ok || err != nil {
			return err
		}
	} else {
		begin := func(pass uint32) uint32 {
			m.forget()
			m.run++
			return pass
		}
		res, err := m.onLink(box, from, msg, m.room(), begin)
		switch {
		case err != nil:
			return err
		case res == handled, res == notLink && !m.onItem(box, msg):
			return nil
		}
	}
	m.maybeEnd()
	m.out.flush(box)
	m.in.replenish(box, m.room(), m.in.next)
	return nil
}

// onItem takes in an item, handing it to a worker, or the upstream's End.
func (m *xmapMachine) onItem(box *outbox, msg any) bool {
	switch b := msg.(type) {
	case *messages.Batch:
		if !m.in.admit(box, b.Epoch, b.Seq, m.room()) {
			return false
		}
		m.jobs = append(m.jobs, job{run: m.run, seq: b.Seq, item: b})
		m.inflight[b.Seq] = b
		m.in.commit()
	case *messages.End:
		if !m.in.admitEnd(box, b, m.room()) {
			return false
		}
		if m.drained {
			// The End again: the upstream restarted before the last
			// results were pushed, the link was opened again (the inlet
			// ends only then, in maybeEnd) and the End replayed. Its
			// skipped records were counted the first time.
			return false
		}
		m.skipped += b.Skipped
		m.drained = true
	default:
		return false
	}
	return true
}

// onResult pushes a result: in order (ordered) or at once; false when
// nothing was pushed. A function's error fails the stage.
func (m *xmapMachine) onResult(box *outbox, r *mapped) (bool, error) {
	if m.inflight[r.seq] == nil {
		return false, nil // not asked for, or its result came already
	}
	delete(m.inflight, r.seq)
	if !m.ordered {
		if r.err != nil {
			m.fail(box, r.err)
			return false, r.err
		}
		m.push(r)
		m.pushed[r.seq] = true
		for m.pushed[m.base] {
			delete(m.pushed, m.base)
			m.base++
		}
		return true, nil
	}
	m.waiting[r.seq] = r
	for w := m.waiting[m.base]; w != nil; w = m.waiting[m.base] {
		if w.err != nil {
			m.fail(box, w.err)
			return false, w.err
		}
		m.push(w)
		delete(m.waiting, m.base)
		m.base++
	}
	return true, nil
}

// push hands a result on, counting the samples its function dropped
// with the skipped records: a result is pushed once, whatever restarts.
func (m *xmapMachine) push(r *mapped) {
	m.out.push(r.item)
	m.fx.made(r.item)
	m.skipped += uint64(r.dropped)
}

// maybeEnd ends the pass downstream once the upstream ended and every
// result is pushed.
func (m *xmapMachine) maybeEnd() {
	if m.drained && !m.in.ended && m.base == m.in.next {
		m.in.ended = true
		m.out.end = &messages.End{Pass: m.out.pass, Count: m.out.produced(), Skipped: m.skipped}
	}
}

// room is how many more items the stage should ask for: no more than the
// workers and their buffer can hold, so handing an item to them never
// blocks, and none while the produced items pile up unsent.
func (m *xmapMachine) room() int {
	if m.drained {
		return 0
	}
	return min(m.limit-int(m.in.next-m.base), m.capacity-m.out.unsent())
}

// xmapActor is one incarnation of an xmap stage: it runs its machine and
// owns the worker goroutines, which it starts when it starts (or a pass
// begins) and cancels and joins when it stops or restarts.
type xmapActor struct {
	c        *cell
	m        *xmapMachine
	fn       SampleMapFunc
	workers  int
	jobs     chan job
	cancel   context.CancelFunc
	finished chan struct{} // a signal per worker that returned
}

func (a *xmapActor) Receive(ctx actor.Context) {
	c, m := a.c, a.m
	msg, box := c.receive(ctx)
	defer c.post()
	defer func() { c.meter.gauge(m.load()) }()
	switch r := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			m.restarted(box)
			c.announce(box)
		}
		a.start(ctx)
		a.dispatch()
		return
	case *actor.Stopping, *actor.Restarting:
		a.stop()
		return
	case *mapped:
		if r.run == m.run && r.panic != nil {
			panic(r.panic)
		}
	}
	run := m.run
	if err := m.step(box, ctx.Sender(), msg); err != nil {
		c.pipe.record(c.name, err)
	}
	if m.run != run { // a new pass: the workers of the last are not wanted
		a.stop()
		a.start(ctx)
	}
	a.dispatch()
}

// dispatch hands the workers the jobs of the last step.
func (a *xmapActor) dispatch() {
	for _, j := range a.m.jobs {
		a.jobs <- j // never blocks: room keeps the items with the workers within the channel's capacity
	}
	clear(a.m.jobs)
	a.m.jobs = a.m.jobs[:0]
}

// start begins a new incarnation of the worker pool, for the machine's run.
func (a *xmapActor) start(ctx actor.Context) {
	jobs, finished := make(chan job, a.m.limit), make(chan struct{}, a.workers)
	a.jobs, a.finished = jobs, finished
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	self, root, pass := ctx.Self(), ctx.ActorSystem().Root, a.m.out.pass
	// The workers hold this incarnation's channels, not the actor's fields:
	// a worker abandoned by stop never takes a later incarnation's job.
	for range a.workers {
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
	m.item, m.dropped, m.err = apply(a.c.pipe, a.fn, pass, j.item, nil)
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
	if !join(a.finished, a.workers, a.c.pipe.opts.StopGrace) {
		a.c.pipe.abandon(fmt.Sprintf("stage %s's function", a.c.name))
	}
}
