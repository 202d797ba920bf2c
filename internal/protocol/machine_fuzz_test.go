package protocol

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// FuzzRelayMachine feeds a relay random, often hostile, sequences of
// messages from both sides and restarts, and checks its invariants after
// every step (linkFuzz).
func FuzzRelayMachine(f *testing.F) {
	f.Add([]byte{0, 3, 3, 3, 1, 3, 3, 4, 3, 4}, uint8(4), uint8(2), uint8(2))
	f.Add([]byte{0, 3, 6, 3, 7, 3, 2, 0, 3, 4, 5}, uint8(1), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, ops []byte, window, capacity, passes uint8) {
		m := newPairRelay(int(window%8)+1, int(capacity%8)+1, uint32(passes%3)+1)
		fz := newLinkFuzz(m, []*actor.PID{up}, []*Inlet{&m.In}, []*Outlet{&m.Out})
		fz.fresh = func(s *messages.Subscribe) bool { return m.Out.classify(s) == freshSub }
		fz.reset = func() bool {
			return m.In.next == 0 && m.skipped == 0 && len(m.Logic.(*pairLogic).pending) == 0
		}
		fz.run(t, ops)
	})
}

// FuzzMergeMachine does the same for the merge stage, whose output must
// moreover keep the deal stage's turn: the lanes number their items so that
// the merged pass is 0, 1, 2, ... in order.
func FuzzMergeMachine(f *testing.F) {
	f.Add([]byte{0, 3, 3, 3, 1, 3, 3, 4, 3, 4}, uint8(2), uint8(2), uint8(4))
	f.Add([]byte{0, 11, 3, 19, 6, 3, 7, 3, 2, 0, 3, 4, 12}, uint8(3), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, ops []byte, lanes, queue, capacity uint8) {
		k := int(lanes%3) + 1
		names, pids, ins := make([]string, k), make([]*actor.PID, k), make([]*Inlet, k)
		for l := range k {
			names[l], pids[l] = fmt.Sprint("lane", l), actor.NewPID("local", fmt.Sprint("lane", l))
		}
		m := NewMergeMachine("merge", names, int(queue%4)+1, int(capacity%6)+1)
		for l := range m.Ins {
			m.Ins[l].Pub, ins[l] = pids[l], &m.Ins[l]
		}
		fz := newLinkFuzz(m, pids, ins, []*Outlet{&m.out})
		fz.fresh = func(s *messages.Subscribe) bool { return m.out.classify(s) == freshSub }
		fz.reset = func() bool {
			return m.turn == 0 && !slices.ContainsFunc(m.skipped, func(n uint64) bool { return n != 0 }) && !slices.ContainsFunc(m.queues, func(q []*messages.Batch) bool { return len(q) > 0 })
		}
		fz.inTurn = true
		fz.run(t, ops)
	})
}

// FuzzFanoutMachine does the same for the double buffer (and the deal
// stage): lane l's item k must be the pass's item k*n + l, a lane's
// subscription for a pass it left must not take the others back to it,
// and the next pass read ahead must come out whole.
func FuzzFanoutMachine(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 3, 0, 3, 0, 3, 0, 4, 0, 0, 9, 0, 1}, uint8(2), uint8(2), false)
	f.Add([]byte{0, 0, 3, 0, 3, 0, 4, 0, 0, 1, 3, 0, 4, 0, 0, 9}, uint8(1), uint8(3), true)
	f.Fuzz(func(t *testing.T, ops []byte, lanes, window uint8, dropPartial bool) {
		n := int(lanes%3) + 1
		m := &FanoutMachine{Name: "buffer", Outs: make([]Outlet, n), Window: int(window%4) + 1, DropPartial: dropPartial, ReadsAhead: true}
		m.In.Window, m.In.Pub = int64(n*m.Window), up
		outs := make([]*Outlet, n)
		for l := range n {
			outs[l] = &m.Outs[l]
		}
		fz := newLinkFuzz(m, []*actor.PID{up}, []*Inlet{&m.In}, outs)
		fz.fresh = func(s *messages.Subscribe) bool { return !m.running || s.Pass > m.pass }
		fz.reset = func() bool {
			return m.running && m.In.Pass == m.pass && len(m.ahead) == 0 && m.aheadEnd == nil && m.aheadFail == nil
		}
		fz.inTurn = true
		fz.run(t, ops)
	})
}

// linkFuzz plays a machine's subscribers and publishers from a fuzzer's
// bytes: each publisher keeps to the protocol or breaks it (gaps,
// duplicates, items past its credit, wrong counts) as the bytes say, and
// so does each subscriber (stale epochs and passes, bad demand and
// acknowledgements, resubscriptions from anywhere). After every step it
// checks the invariants every link keeps: credit never negative nor past
// the window, nothing sent past demand or after the epoch ended, items in
// sequence and the same items when replayed, and a new pass begun from a
// known state.
type linkFuzz struct {
	m      Machine
	ups    []*upModel
	ins    []*Inlet
	downs  []*downModel
	fresh  func(*messages.Subscribe) bool // the subscription will begin a pass
	reset  func() bool                    // the machine's state right after a pass began
	inTurn bool                           // item k of lane l is the pass's k*lanes+l
	// other, when set, is a fuzz op of the machine's own (op 8; else a
	// restart); after checks what the machine did besides its messages;
	// allowed is an error the machine may fail with besides the protocol's.
	other   func(box *Outbox, arg byte) error
	after   func() string
	allowed error
}

// upModel is a publisher: the link the machine last opened to it.
type upModel struct {
	pid            *actor.PID
	epoch          uint64
	pass           uint32
	next           uint64 // the next item it sends in order
	credit, window int64  // demanded and not sent; the most it may be
	open, opened   bool
}

// downModel is a subscriber: what it asked for on each epoch and what came.
type downModel struct {
	pid     *actor.PID
	lane    uint32
	out     *Outlet
	epoch   uint64
	pass    uint32
	taken   uint64 // items of the pass taken in, in order: its acknowledgement
	granted map[uint64]int64
	got     map[uint64]int64
	next    map[uint64]uint64 // the sequence number expected next on an epoch
	done    map[uint64]bool   // End or Failure came on the epoch
	ids     map[uint64][]uint64
	seqOf   map[uint64]uint64 // the item each id came in, this pass
}

func newLinkFuzz(m Machine, pids []*actor.PID, ins []*Inlet, outs []*Outlet) *linkFuzz {
	fz := &linkFuzz{m: m, ins: ins}
	for l, pid := range pids {
		fz.ups = append(fz.ups, &upModel{pid: pid, window: ins[l].Window})
	}
	for l, o := range outs {
		pid := down
		if len(outs) > 1 {
			pid = actor.NewPID("local", fmt.Sprint("down", l))
		}
		fz.downs = append(fz.downs, newDownModel(pid, uint32(l), o))
	}
	return fz
}

func newDownModel(pid *actor.PID, lane uint32, out *Outlet) *downModel {
	return &downModel{pid: pid, lane: lane, out: out, granted: map[uint64]int64{}, got: map[uint64]int64{},
		next: map[uint64]uint64{}, done: map[uint64]bool{}, ids: map[uint64][]uint64{}, seqOf: map[uint64]uint64{}}
}

func (fz *linkFuzz) run(t *testing.T, ops []byte) {
	var box Outbox
	for i := 0; i+1 < len(ops); i += 2 {
		fresh, err := fz.event(&box, ops[i]%9, ops[i+1])
		if err != nil && !errors.Is(err, ErrProtocol) && (fz.allowed == nil || !errors.Is(err, fz.allowed)) {
			t.Fatalf("op %d: an error that is not the protocol's: %v", i, err)
		}
		if fresh && err == nil && !fz.reset() {
			t.Fatalf("op %d: a new pass began with state of the last", i)
		}
		for _, e := range drain(&box) {
			if msg := fz.deliver(e); msg != "" {
				t.Fatalf("op %d: %s: %s", i, show(e), msg)
			}
		}
		if fz.after != nil {
			if msg := fz.after(); msg != "" {
				t.Fatalf("op %d: %s", i, msg)
			}
		}
		for l, in := range fz.ins {
			if in.Outstanding < 0 || in.Outstanding > in.Window {
				t.Fatalf("op %d: upstream %d has %d outstanding, window %d", i, l, in.Outstanding, in.Window)
			}
		}
		for l, d := range fz.downs {
			if d.out.demand < 0 {
				t.Fatalf("op %d: lane %d's demand is %d", i, l, d.out.demand)
			}
		}
	}
}

// event makes one message from op and arg and steps the machine with it.
// fresh says it was a subscription that began a pass.
func (fz *linkFuzz) event(box *Outbox, op, arg byte) (fresh bool, err error) {
	if op == 8 && fz.other != nil {
		return false, fz.other(box, arg)
	}
	if op >= 7 {
		fz.m.Restarted(box)
		return false, nil
	}
	if op < 3 {
		d := fz.downs[int(arg>>6)%len(fz.downs)]
		switch op {
		case 0:
			return fz.subscribe(box, d, arg)
		case 1:
			m := &messages.Demand{Epoch: d.epoch - uint64(arg&1), N: int64(arg>>1%6) - 1, Ack: d.taken}
			if arg&32 != 0 {
				m.Ack += uint64(arg>>4) % 3
			}
			err := fz.m.Step(box, d.pid, m)
			if m.Epoch == d.epoch && m.N > 0 && d.out.sub == d.pid && d.out.Epoch == m.Epoch {
				d.granted[m.Epoch] += m.N
			}
			return false, err
		}
		return false, fz.m.Step(box, d.pid, &messages.Cancel{Epoch: d.epoch - uint64(arg&1)})
	}
	u := fz.ups[int(arg)%len(fz.ups)]
	switch op {
	case 3:
		return false, fz.m.Step(box, u.pid, fz.item(u, arg))
	case 4:
		return false, fz.m.Step(box, u.pid, &messages.End{Epoch: u.epoch, Pass: u.pass, Count: u.next + uint64(arg>>7)})
	case 5:
		return false, fz.m.Step(box, u.pid, &messages.Failure{Epoch: u.epoch, Cause: "fuzz"})
	}
	return false, fz.m.Step(box, u.pid, &messages.Resubscribe{Stage: u.pid.Id})
}

// subscribe sends d's subscription: for its pass, the next or the last,
// from the first item taken in or from anywhere, under a new epoch or an
// old one.
func (fz *linkFuzz) subscribe(box *Outbox, d *downModel, arg byte) (bool, error) {
	m := &messages.Subscribe{Epoch: d.epoch + 1, Pass: d.pass, From: d.taken, Demand: int64(arg>>3) % 6, Lane: d.lane}
	switch arg % 4 {
	case 1:
		m.Pass++
	case 2:
		m.Pass = max(d.pass, 1) - 1
	}
	if arg&4 != 0 {
		m.Epoch = d.epoch
	}
	if arg&32 != 0 {
		m.From = uint64(arg>>3) % 4
	}
	fresh := fz.fresh(m)
	was := d.out.sub == d.pid && d.out.Epoch == m.Epoch
	err := fz.m.Step(box, d.pid, m)
	if was || d.out.sub != d.pid || d.out.Epoch != m.Epoch {
		return false, err // not taken: the link stays on its epoch
	}
	if m.Pass != d.pass || fresh {
		d.pass, d.taken = m.Pass, m.From
		clear(d.ids)
		clear(d.seqOf)
	}
	d.epoch, d.granted[m.Epoch], d.next[m.Epoch] = m.Epoch, m.Demand, m.From
	return fresh, err
}

// item is the item a publisher sends: the next in order, within its credit,
// unless arg says to break the protocol. Its ids say which it is.
func (fz *linkFuzz) item(u *upModel, arg byte) *messages.Batch {
	seq := u.next
	if arg&8 != 0 {
		seq = u.next + uint64(arg>>5%3) - 1 // a duplicate, the next, or a gap
	}
	honest := seq == u.next && u.credit > 0 && u.open
	if !honest && arg&16 == 0 {
		seq = u.next + 1 // past its credit, or a gap: never the next
	}
	lane := uint64(slices.Index(fz.ups, u))
	id := uint64(u.pass)*1000 + seq
	if fz.inTurn {
		id = seq*uint64(len(fz.ups)) + lane
	}
	if honest {
		u.next++
		u.credit--
	}
	return &messages.Batch{Epoch: u.epoch, Seq: seq, Pass: u.pass, Ids: []uint64{id}}
}

// deliver takes a message the machine sent, and says what is wrong with it.
func (fz *linkFuzz) deliver(e envelope) string {
	for _, d := range fz.downs {
		if d.pid == e.to {
			return fz.toDown(d, e.msg)
		}
	}
	for _, u := range fz.ups {
		if u.pid == e.to {
			return u.take(e.msg)
		}
	}
	return "sent to no one it knows"
}

func (fz *linkFuzz) toDown(d *downModel, msg any) string {
	switch m := msg.(type) {
	case *messages.Batch:
		n := uint64(len(fz.downs))
		switch {
		case m.Epoch > d.epoch:
			return "an epoch the subscriber never opened"
		case d.done[m.Epoch]:
			return "an item after the epoch ended"
		case m.Seq != d.next[m.Epoch]:
			return fmt.Sprintf("expected #%d on the epoch", d.next[m.Epoch])
		case d.got[m.Epoch] >= d.granted[m.Epoch]:
			return "more than the subscriber demanded"
		case fz.inTurn && !slices.Equal(m.Ids, []uint64{m.Seq*n + uint64(d.lane)}):
			return "out of turn"
		}
		if ids, ok := d.ids[m.Seq]; ok && !slices.Equal(ids, m.Ids) {
			return fmt.Sprintf("replayed as %v", ids)
		}
		for _, id := range m.Ids {
			if seq, ok := d.seqOf[id]; ok && seq != m.Seq {
				return fmt.Sprintf("id %d came in item #%d too", id, seq)
			}
			d.seqOf[id] = m.Seq
		}
		d.ids[m.Seq] = m.Ids
		d.next[m.Epoch]++
		d.got[m.Epoch]++
		if m.Epoch == d.epoch && m.Seq == d.taken {
			d.taken++
		}
	case *messages.End:
		if d.done[m.Epoch] || m.Count != d.next[m.Epoch] {
			return fmt.Sprintf("an End after %d items", d.next[m.Epoch])
		}
		d.done[m.Epoch] = true
	case *messages.Failure:
		d.done[m.Epoch] = true
	default:
		return "not a message for a subscriber"
	}
	return ""
}

// take is a publisher taking what the machine asks of it.
func (u *upModel) take(msg any) string {
	switch m := msg.(type) {
	case *messages.Subscribe:
		if u.opened && m.Epoch <= u.epoch {
			return "an epoch no newer than the last"
		}
		u.epoch, u.pass, u.next, u.credit, u.open, u.opened = m.Epoch, m.Pass, m.From, m.Demand, true, true
	case *messages.Demand:
		if m.Epoch != u.epoch || m.N <= 0 {
			return "demand for another epoch, or none"
		}
		u.credit += m.N
	case *messages.Cancel:
		if m.Epoch != u.epoch {
			return "a Cancel of another epoch"
		}
		u.open = false
	default:
		return "not a message for a publisher"
	}
	if u.credit > u.window {
		return fmt.Sprintf("credit %d past the window %d", u.credit, u.window)
	}
	return ""
}

// errMapFuzz is a map function's error in FuzzXMapMachine.
var errMapFuzz = errors.New("the function failed")

// FuzzXMapMachine does the same for an xmap stage, playing its workers
// too: results come back in any order, twice, from an old incarnation, or
// as the function's error. Ordered, its output is its input's order;
// either way no item is handed out past the workers and their buffer.
func FuzzXMapMachine(f *testing.F) {
	f.Add([]byte{0, 40, 3, 0, 3, 0, 8, 1, 8, 0, 4, 0, 1, 40}, uint8(2), uint8(1), uint8(2), true)
	f.Add([]byte{0, 40, 3, 0, 3, 0, 7, 0, 8, 0, 8, 0, 4, 0, 8, 128}, uint8(1), uint8(0), uint8(3), false)
	f.Fuzz(func(t *testing.T, ops []byte, workers, buffer, capacity uint8, ordered bool) {
		m := NewXMapMachine("xmap", int(workers%3)+1+int(buffer%3), ordered, int(capacity%4)+1, 2)
		m.In.Pub = up
		fz := newLinkFuzz(m, []*actor.PID{up}, []*Inlet{&m.In}, []*Outlet{&m.Out})
		fz.fresh = func(s *messages.Subscribe) bool { return m.Out.classify(s) == freshSub }
		fz.reset = func() bool { return m.base == 0 && !m.drained && len(m.inflight) == 0 && len(m.waiting) == 0 }
		fz.inTurn, fz.allowed = ordered, errMapFuzz
		var given []Job // handed to the workers, no result yet
		fz.after = func() string {
			given = append(given, m.Jobs...)
			m.Jobs = m.Jobs[:0]
			if len(m.inflight) > m.Limit {
				return fmt.Sprintf("%d items with the workers, past %d", len(m.inflight), m.Limit)
			}
			return ""
		}
		fz.other = func(box *Outbox, arg byte) error {
			if len(given) == 0 {
				return nil
			}
			i := int(arg) % len(given)
			j := given[i]
			r := &Mapped{Run: j.Run, Seq: j.Seq, Item: &messages.Batch{Pass: m.Out.Pass, Ids: j.Item.Ids}}
			switch arg >> 5 {
			case 1:
				r.Run-- // an old incarnation's
			case 2:
				r.Item, r.Err = nil, errMapFuzz
			}
			if arg>>5 != 3 { // else a second result of the same job follows
				given = slices.Delete(given, i, i+1)
			}
			return m.Step(box, up, r)
		}
		fz.run(t, ops)
	})
}
