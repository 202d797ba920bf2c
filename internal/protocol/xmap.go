package protocol

import (
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// XMapMachine is the xmap stage's protocol: the relay's links, the items
// handed to the workers and not yet back (inflight), results kept for their
// turn (ordered), and the end of a pass once every result is pushed. An
// item stays inflight until its result arrives, so a restart, which loses
// the work in flight with the old workers, hands those items to the new
// ones. base is the first item whose result has not been pushed. Its steps
// put what to send in the outbox and what the workers must compute in
// Jobs; actors.xmapActor owns the workers.
type XMapMachine struct {
	Relay
	Limit   int // items between intake and push: workers + buffer
	ordered bool

	Run      uint64 // incarnation of the worker pool: results of others are dropped
	base     uint64
	inflight map[uint64]*messages.Batch // items handed to workers, without a result yet
	waiting  map[uint64]*Mapped         // ordered: results kept until their turn
	pushed   map[uint64]bool            // unordered: results above base already pushed
	drained  bool                       // the upstream's End was taken in
	Jobs     []Job                      // for the workers, once the step is over
	Effects  Effects
}

// Job is one item for a worker.
type Job struct {
	Run, Seq uint64
	Item     *messages.Batch
}

// Mapped is a worker's result, sent to the stage's actor.
type Mapped struct {
	Run, Seq uint64
	Item     *messages.Batch
	Dropped  int // samples the function could not read, dropped (apply)
	Err      error
	Panic    any // the function panicked: the stage restarts
}

// NewXMapMachine is the machine of an xmap stage whose workers and buffer
// hold limit items between intake and push.
func NewXMapMachine(name string, limit int, ordered bool, capacity, window int) *XMapMachine {
	m := &XMapMachine{Relay: Relay{Name: name, Capacity: capacity}, Limit: limit, ordered: ordered}
	m.In.Window = int64(max(window, m.Limit))
	m.In.Reach = int64(min(m.Limit, capacity))
	m.forget()
	return m
}

// forget drops what the workers were given of the pass.
func (m *XMapMachine) forget() {
	m.base, m.drained = 0, false
	m.inflight, m.waiting, m.pushed = map[uint64]*messages.Batch{}, map[uint64]*Mapped{}, map[uint64]bool{}
}

// Restarted begins a new incarnation of the workers: the work in flight
// died with the old ones, so its items go to the new ones. The dropped
// message may have been an item or demand: the links open again.
func (m *XMapMachine) Restarted(box *Outbox) {
	m.Run++
	for _, seq := range slices.Sorted(maps.Keys(m.inflight)) {
		m.Jobs = append(m.Jobs, Job{Run: m.Run, Seq: seq, Item: m.inflight[seq]})
	}
	m.In.Reopen(box, m.room())
}

func (m *XMapMachine) Load() (int, int64) { return m.Out.Held(), m.In.Outstanding }

// Step takes a link message or a worker's result. A new pass begins a new
// incarnation of the workers (run).
func (m *XMapMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	if r, ok := msg.(*Mapped); ok {
		if r.Run != m.Run {
			return nil // from an earlier incarnation or pass
		}
		if ok, err := m.onResult(box, r); !ok || err != nil {
			return err
		}
	} else {
		begin := func(pass uint32) uint32 {
			m.forget()
			m.Run++
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
	m.Out.Flush(box)
	m.In.Replenish(box, m.room(), m.In.next)
	return nil
}

// onItem takes in an item, handing it to a worker, or the upstream's End.
func (m *XMapMachine) onItem(box *Outbox, msg any) bool {
	switch b := msg.(type) {
	case *messages.Batch:
		if !m.In.Admit(box, b.Epoch, b.Seq, m.room()) {
			return false
		}
		m.Jobs = append(m.Jobs, Job{Run: m.Run, Seq: b.Seq, Item: b})
		m.inflight[b.Seq] = b
		m.In.Commit()
	case *messages.End:
		if !m.In.AdmitEnd(box, b, m.room()) {
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
func (m *XMapMachine) onResult(box *Outbox, r *Mapped) (bool, error) {
	if m.inflight[r.Seq] == nil {
		return false, nil // not asked for, or its result came already
	}
	delete(m.inflight, r.Seq)
	if !m.ordered {
		if r.Err != nil {
			m.fail(box, r.Err)
			return false, r.Err
		}
		m.push(r)
		m.pushed[r.Seq] = true
		for m.pushed[m.base] {
			delete(m.pushed, m.base)
			m.base++
		}
		return true, nil
	}
	m.waiting[r.Seq] = r
	for w := m.waiting[m.base]; w != nil; w = m.waiting[m.base] {
		if w.Err != nil {
			m.fail(box, w.Err)
			return false, w.Err
		}
		m.push(w)
		delete(m.waiting, m.base)
		m.base++
	}
	return true, nil
}

// push hands a result on, counting the samples its function dropped
// with the skipped records: a result is pushed once, whatever restarts.
func (m *XMapMachine) push(r *Mapped) {
	m.Out.Push(r.Item)
	m.Effects.made(r.Item)
	m.skipped += uint64(r.Dropped)
}

// maybeEnd ends the pass downstream once the upstream ended and every
// result is pushed.
func (m *XMapMachine) maybeEnd() {
	if m.drained && !m.In.Ended && m.base == m.In.next {
		m.In.Ended = true
		m.Out.End = &messages.End{Pass: m.Out.Pass, Count: m.Out.Produced(), Skipped: m.skipped}
	}
}

// room is how many more items the stage should ask for: no more than the
// workers and their buffer can hold, so handing an item to them never
// blocks, and none while the produced items pile up unsent.
func (m *XMapMachine) room() int {
	if m.drained {
		return 0
	}
	return min(m.Limit-int(m.In.next-m.base), m.Capacity-m.Out.Unsent())
}
