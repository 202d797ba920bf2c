package protocol

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

const fuzzLease = 4 * time.Second

// serviceFuzz plays a service machine's subscriber, its workers and its
// clock from a fuzzer's bytes. The workers keep to the protocol or break
// it as the bytes say: batches lost on the way, sent past their credit or
// twice, attempts ended early, busy answers, nodes that die and come back,
// heartbeats that contradict what was taken in. After every step it
// checks that the subscriber got each batch of a pass at most once and in
// the order, that no task holds more than its credit, and that memory is
// bounded; after the bytes it lets every worker behave and checks that
// the pass ends with every batch exactly once.
type serviceFuzz struct {
	m       *ServiceMachine
	now     time.Time
	workers []*workerModel
	d       *downModel
	link    *linkFuzz          // for its subscriber's checks (toDown)
	tasks   map[uint32][]*Task // each pass's, as last made
	made    map[uint64]*Task   // every task made, by id: a worker may run one of a pass made again
	sizes   map[uint64]uint32  // batches of each task
	nextID  uint64
	last    map[uint32]uint64 // the last id the subscriber got of each pass
}

// workerModel is a worker: its session and the attempts it runs.
type workerModel struct {
	w        *Worker
	session  string
	attempts map[uint64]*attemptModel
	probing  bool
	down     bool // its node is gone: it takes no message
}

type attemptModel struct {
	attempt              uint32
	next, granted, total uint32
}

func newServiceFuzz(workers, credit, tasks, capacity, size uint8) *serviceFuzz {
	fz := &serviceFuzz{now: time.Unix(1e9, 0), tasks: map[uint32][]*Task{}, made: map[uint64]*Task{}, sizes: map[uint64]uint32{},
		last: map[uint32]uint64{}}
	fz.m = &ServiceMachine{Name: "service", Credit: int(credit%4) + 1, Tasks: int(tasks%2) + 1, Lease: fuzzLease,
		WaitForWorkers: 1000 * fuzzLease, Capacity: int(capacity%4) + 1, Session: "s", Self: "self",
		Now: func() time.Time { return fz.now }}
	for i := range int(workers%3) + 1 {
		addr := fmt.Sprint("w", i)
		w := &Worker{Addr: addr, PID: actor.NewPID(addr, "worker")}
		fz.m.Workers = append(fz.m.Workers, w)
		fz.workers = append(fz.workers, &workerModel{w: w, attempts: map[uint64]*attemptModel{}})
	}
	n := int(size%4) + 1
	fz.m.TasksOf = func(pass uint32) ([]*Task, error) {
		var ts []*Task
		lo := uint64(0)
		for i := range n {
			t := NewTask(fz.nextID, lo)
			fz.nextID++
			fz.made[t.ID] = t
			fz.sizes[t.ID] = uint32(1 + (i*5+int(pass))%7)
			lo += uint64(fz.sizes[t.ID])
			ts = append(ts, t)
		}
		fz.tasks[pass] = ts
		return ts, nil
	}
	fz.d = newDownModel(down, 0, &fz.m.Out)
	fz.link = &linkFuzz{downs: []*downModel{fz.d}}
	return fz
}

// batchID names batch i of task t of pass.
func batchID(pass uint32, t *Task, i uint32) uint64 { return uint64(pass)*10000 + t.Lo + uint64(i) }

func FuzzServiceMachine(f *testing.F) {
	f.Add([]byte{0, 0, 7, 1, 7, 0, 5, 0, 5, 1, 3, 0, 3, 0, 4, 0, 1, 9}, uint8(2), uint8(2), uint8(1), uint8(2), uint8(3))
	f.Add([]byte{0, 0, 7, 1, 5, 0, 3, 128, 3, 0, 5, 0, 10, 0, 6, 7, 7, 1, 8, 0, 9, 4}, uint8(1), uint8(1), uint8(0), uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, ops []byte, workers, credit, tasks, capacity, size uint8) {
		fz := newServiceFuzz(workers, credit, tasks, capacity, size)
		var box Outbox
		fz.m.Start(&box)
		fz.deliver(t, -1, &box)
		failed := false
		for i := 0; i+1 < len(ops); i += 2 {
			err := fz.event(&box, ops[i]%12, ops[i+1])
			if err != nil && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrNoWorkers) {
				t.Fatalf("op %d: an error neither the protocol's nor the wait's: %v", i, err)
			}
			failed = failed || err != nil
			fz.deliver(t, i, &box)
			fz.check(t, i)
		}
		if !failed && !fz.m.Out.Closed {
			fz.finish(t, &box)
		}
	})
}

// event makes one message from op and arg and steps the machine with it.
func (fz *serviceFuzz) event(box *Outbox, op, arg byte) error {
	m, d := fz.m, fz.d
	switch op {
	case 0: // the subscriber begins the next pass, or resumes this one
		s := &messages.Subscribe{Epoch: d.epoch + 1, Pass: d.pass + 1, Demand: int64(arg % 4)}
		if arg&4 != 0 || d.epoch == 0 {
			s.Pass, s.From = d.pass, d.taken
		}
		if d.epoch == 0 {
			s.Pass, s.From = 0, 0
		}
		err := m.Step(box, d.pid, s)
		if m.Out.Epoch == s.Epoch {
			if s.Pass != d.pass || d.epoch == 0 {
				clear(d.ids)
				clear(d.seqOf)
			}
			d.epoch, d.pass, d.taken, d.granted[s.Epoch], d.next[s.Epoch] = s.Epoch, s.Pass, s.From, s.Demand, s.From
		}
		return err
	case 1:
		dm := &messages.Demand{Epoch: d.epoch, N: int64(arg%6) + 1, Ack: d.taken}
		d.granted[d.epoch] += dm.N
		return m.Step(box, d.pid, dm)
	case 2:
		if arg < 16 { // rarely: a cancelled pass is over
			return m.Step(box, d.pid, &messages.Cancel{Epoch: d.epoch})
		}
		return nil
	case 6:
		fz.now = fz.now.Add(time.Duration(arg%8+1) * fuzzLease / 8)
		return m.Step(box, nil, Tick{})
	case 8:
		m.Restarted(box)
		m.Start(box)
		return nil
	}
	return fz.workerEvent(box, op, arg)
}

// workerEvent is a worker's message, as arg picks the worker and attempt.
func (fz *serviceFuzz) workerEvent(box *Outbox, op, arg byte) error {
	wm := fz.workers[int(arg&3)%len(fz.workers)]
	ids := slices.Sorted(maps.Keys(wm.attempts))
	var task uint64
	var a *attemptModel
	if len(ids) > 0 {
		task = ids[int(arg>>2)%len(ids)]
		a = wm.attempts[task]
	}
	switch op {
	case 3, 11: // a batch: 11 past its credit, or twice; arg&128 lost on the way
		if a == nil || wm.down {
			return nil
		}
		// Past its credit or twice, but never a batch its task does not
		// have: what a batch holds is the worker's to say.
		if a.next >= a.total || (op == 3 && a.next >= a.granted) {
			return nil
		}
		idx := a.next
		if op == 11 && arg&64 != 0 && idx > 0 {
			idx-- // again
		} else {
			a.next++
		}
		if arg&128 != 0 {
			return nil
		}
		return fz.m.Step(box, wm.w.PID, fz.batch(wm, task, a, idx))
	case 4: // the attempt's end: early when arg says
		if a == nil || wm.down || (a.next < a.total && arg&128 == 0) {
			return nil
		}
		delete(wm.attempts, task)
		return fz.m.Step(box, wm.w.PID, &messages.ServiceTaskEnd{Session: wm.session, Task: task, Attempt: a.attempt, Batches: a.total})
	case 5:
		if wm.down || wm.session == "" {
			return nil
		}
		hb := &messages.ServiceHeartbeat{Session: wm.session}
		for _, id := range ids {
			hb.Tasks, hb.Attempts, hb.Sent = append(hb.Tasks, id), append(hb.Attempts, wm.attempts[id].attempt), append(hb.Sent, wm.attempts[id].next)
		}
		for i := range uint64(arg>>4) & 8 { // attempts it was never given
			hb.Tasks, hb.Attempts, hb.Sent = append(hb.Tasks, 1000+i), append(hb.Attempts, 1), append(hb.Sent, 0)
		}
		return fz.m.Step(box, wm.w.PID, hb)
	case 7: // its probe's answer
		if !wm.probing {
			return nil
		}
		wm.probing = false
		ok := arg&128 == 0
		wm.down = wm.down && !ok
		return fz.m.Step(box, nil, Probed{Worker: wm.w, OK: ok})
	case 9: // busy: for an attempt, or for a hello
		if wm.down || wm.session == "" {
			return nil
		}
		busy := &messages.ServiceBusy{Session: wm.session, Reason: "fuzz"}
		if a != nil && arg&128 == 0 {
			busy.Task, busy.Attempt = task, a.attempt
			delete(wm.attempts, task)
		}
		return fz.m.Step(box, wm.w.PID, busy)
	}
	// 10: its node is gone
	wm.down, wm.session = true, ""
	clear(wm.attempts)
	return fz.m.Step(box, nil, &actor.Terminated{Who: wm.w.PID, Why: actor.TerminatedReason_AddressTerminated})
}

// batch is batch idx of an attempt, as a worker sends it: positions
// counted from the task's start, ids naming it in the pass.
func (fz *serviceFuzz) batch(wm *workerModel, task uint64, a *attemptModel, idx uint32) *messages.ServiceBatch {
	pass := fz.m.Out.Pass
	return &messages.ServiceBatch{Session: wm.session, Task: task, Attempt: a.attempt, Index: idx,
		Batch: &messages.Batch{Position: uint64(idx), Ids: []uint64{batchID(pass, fz.made[task], idx)}}}
}

// deliver hands what the machine sent to the subscriber and the workers.
// What one step sends is bounded by the machine's own sizes, whatever a
// peer sent it.
func (fz *serviceFuzz) deliver(t *testing.T, op int, box *Outbox) {
	sent := drain(box)
	m, batches := fz.m, 0
	for _, n := range fz.sizes {
		batches = max(batches, int(n))
	}
	if bound := 3*len(m.Workers) + 4*len(m.tasks) + m.Tasks + len(m.tasks)*batches + m.Capacity + 2; len(sent) > bound {
		t.Fatalf("op %d: one step sent %d messages, bound %d", op, len(sent), bound)
	}
	for _, e := range sent {
		if e.to == fz.d.pid {
			if msg := fz.link.toDown(fz.d, e.msg); msg != "" {
				t.Fatalf("op %d: %s: %s", op, show(e), msg)
			}
			fz.inOrder(t, op, e.msg)
			continue
		}
		wm := fz.workerAt(e.to)
		if wm == nil {
			t.Fatalf("op %d: %s: sent to no one it knows", op, show(e))
		}
		wm.take(e.msg, fz.sizes)
	}
}

// inOrder checks that the pass's batches come in the order: ids rise.
func (fz *serviceFuzz) inOrder(t *testing.T, op int, msg any) {
	b, ok := msg.(*messages.Batch)
	if !ok || b.Epoch != fz.d.epoch {
		return
	}
	for _, id := range b.Ids {
		if last, ok := fz.last[fz.d.pass]; ok && id <= last && fz.d.seqOf[id] != b.Seq {
			t.Fatalf("op %d: id %d after %d", op, id, last)
		}
		fz.last[fz.d.pass] = max(fz.last[fz.d.pass], id)
	}
}

func (fz *serviceFuzz) workerAt(pid *actor.PID) *workerModel {
	for _, wm := range fz.workers {
		if wm.w.PID == pid {
			return wm
		}
	}
	return nil
}

// take is a worker taking what the machine sends it, as package service's
// worker does.
func (wm *workerModel) take(msg any, sizes map[uint64]uint32) {
	switch msg.(type) {
	case Probe:
		wm.probing = true
		return
	case Watch, Unwatch:
		return
	}
	if wm.down {
		return
	}
	switch m := msg.(type) {
	case *messages.ServiceHello:
		if m.Session != wm.session {
			wm.session = m.Session
			clear(wm.attempts)
		}
	case *messages.ServiceTask:
		if m.Session == wm.session {
			wm.attempts[m.Task] = &attemptModel{attempt: m.Attempt, next: m.Skip, granted: m.Skip + m.Credit, total: sizes[m.Task]}
		}
	case *messages.ServiceCredit:
		if a := wm.attempts[m.Task]; m.Session == wm.session && a != nil && a.attempt == m.Attempt {
			a.granted = max(a.granted, uint32(m.Granted))
		}
	case *messages.ServiceDrop:
		if a := wm.attempts[m.Task]; m.Session == wm.session && a != nil && a.attempt == m.Attempt {
			delete(wm.attempts, m.Task)
		}
	case *messages.ServiceClose:
		if m.Session == wm.session {
			wm.session = ""
			clear(wm.attempts)
		}
	}
}

// check holds the machine to its bounds: no task holds more batches than
// its credit, no credit is negative, and what it holds besides what its
// subscriber was sent is bounded by its outlet's capacity and its
// workers' tasks and credit.
func (fz *serviceFuzz) check(t *testing.T, op int) {
	m := fz.m
	_, demand := m.Load()
	queued := 0
	for _, tk := range m.tasks {
		if len(tk.queue) > m.Credit {
			t.Fatalf("op %d: task %d holds %d batches, credit %d", op, tk.ID, len(tk.queue), m.Credit)
		}
		queued += len(tk.queue)
	}
	for i := range m.Workers {
		if m.WorkerCredit(i) < 0 {
			t.Fatalf("op %d: worker %d has credit %d", op, i, m.WorkerCredit(i))
		}
	}
	if bound := (len(m.Workers)*m.Tasks + 1) * m.Credit; queued > bound || m.Out.Unsent() > m.Capacity || demand < 0 {
		t.Fatalf("op %d: %d batches queued (bound %d), %d unsent (capacity %d), demand %d", op, queued, bound, m.Out.Unsent(), m.Capacity, demand)
	}
}

// finish lets every worker behave and the subscriber demand until the pass
// ends: every batch of it must have come, once.
func (fz *serviceFuzz) finish(t *testing.T, box *Outbox) {
	d := fz.d
	if d.epoch == 0 {
		fz.do(t, box, 0, 0)
	}
	for step := 0; !d.done[d.epoch]; step++ {
		if step == 1000 {
			t.Fatalf("pass %d did not end: %d of its batches came", d.pass, len(d.seqOf))
		}
		fz.do(t, box, 1, 5)
		for i, wm := range fz.workers {
			fz.do(t, box, 7, byte(i))
			fz.do(t, box, 5, byte(i))
			for k := range len(wm.attempts) {
				for range fz.m.Credit {
					fz.do(t, box, 3, byte(i+k<<2))
				}
				fz.do(t, box, 4, byte(i+k<<2))
			}
		}
		fz.do(t, box, 6, 1)
	}
	var want []uint64
	for _, tk := range fz.tasks[d.pass] {
		for i := range fz.sizes[tk.ID] {
			want = append(want, batchID(d.pass, tk, i))
		}
	}
	got := slices.Sorted(maps.Keys(d.seqOf))
	if !slices.Equal(got, want) {
		t.Fatalf("pass %d ended with %v, want %v", d.pass, got, want)
	}
}

// do steps the machine while every worker behaves: no error is allowed.
func (fz *serviceFuzz) do(t *testing.T, box *Outbox, op, arg byte) {
	t.Helper()
	if err := fz.event(box, op, arg); err != nil {
		t.Fatalf("while every worker behaves: %v", err)
	}
	fz.deliver(t, -1, box)
	fz.check(t, -1)
}
