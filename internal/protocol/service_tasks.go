package protocol

import (
	"time"

	"github.com/actorfeed/actorfeed/messages"
)

// Task is a run of the rank's positions of a pass from Lo, which a worker
// makes from State, and what its attempts delivered.
type Task struct {
	ID    uint64
	Lo    uint64 // its first rank position
	Tail  bool   // the rank's state from Lo on (padding): its batches' positions are the rank's
	State []byte // the JSON state a worker resumes from

	worker   int // holding it, or -1
	attempt  uint32
	queue    []*messages.Batch // taken in, not handed on
	handed   uint32            // batches handed on (or dropped as committed before a resume)
	granted  uint64            // the credit the current attempt was given: batches below this index
	sentAt   time.Time         // when its ServiceTask last went out
	ended    bool              // the current attempt ended, having made batches
	batches  uint32
	skipped  uint64
	complete bool // every batch taken in
}

// NewTask is task id from rank position lo, held by no worker.
func NewTask(id, lo uint64) *Task { return &Task{ID: id, Lo: lo, worker: -1} }

// expected is the index of the next batch the current attempt sends.
func (t *Task) expected() uint32 { return t.handed + uint32(len(t.queue)) }

// attempt is the task and its worker that a message of an attempt is
// for, or nil when the attempt is not current (fenced).
func (m *ServiceMachine) attempt(session string, id uint64, attempt uint32) (*Worker, *Task) {
	w := m.worker(session)
	if w == nil || !w.alive || id < m.base || id-m.base >= uint64(len(m.tasks)) {
		return nil, nil
	}
	t := m.tasks[id-m.base]
	if t.complete || t.attempt != attempt || t.worker < 0 || m.Workers[t.worker] != w {
		return nil, nil
	}
	return w, t
}

// requeue takes task t back from its worker: what it took in and did not
// hand on is dropped, and the next attempt starts after what was handed on.
func (m *ServiceMachine) requeue(t *Task) {
	for _, b := range t.queue {
		m.Effects.call(m.Effects.Dropped, b)
	}
	if t.worker >= 0 {
		m.Workers[t.worker].Reassigned++
	}
	t.queue, t.worker, t.ended = nil, -1, false
}

// makeRoom takes back a task that w runs past the head, when w refused
// the head task as busy: the tasks past the head wait for credit that
// only the head's batches bring, so a worker whose room they fill would
// never take the head, and the pass would hang.
func (m *ServiceMachine) makeRoom(box *Outbox, w *Worker) {
	for i := len(m.tasks) - 1; i > m.head; i-- {
		t := m.tasks[i]
		if t.worker >= 0 && m.Workers[t.worker] == w && !t.complete && !t.ended {
			box.Put(w.PID, &messages.ServiceDrop{Session: w.session, Task: t.ID, Attempt: t.attempt})
			m.requeue(t)
			return
		}
	}
}

// handOn moves the head task's batches to the outlet, in the order, while
// it has room; a task wholly handed on makes the next one the head. Once
// every task is, the pass ends.
func (m *ServiceMachine) handOn() {
	for m.subscribed && m.Out.Fail == nil && m.Out.End == nil && m.Out.Unsent() < m.Capacity {
		if m.head == len(m.tasks) {
			var skipped uint64
			for _, t := range m.tasks {
				skipped += t.skipped
			}
			m.Out.End = &messages.End{Pass: m.Out.Pass, Count: m.Out.Produced(), Skipped: skipped}
			return
		}
		t := m.tasks[m.head]
		if len(t.queue) == 0 {
			if !t.complete {
				return
			}
			m.head++
			continue
		}
		b := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.handed++
		if m.skip[b.Position] { // committed before the pipeline resumed
			m.Effects.call(m.Effects.Dropped, b)
			continue
		}
		m.Out.Push(b)
		m.Effects.call(m.Effects.HandedOn, b)
	}
}

// assign hands the tasks no worker holds, first in the order, to the live
// workers that run fewer than Tasks, the least busy first, then the one
// that delivered most: a worker that finishes sooner is given more. Tasks
// held (running, or complete and waiting to be handed on in the order) are
// at most Tasks per worker in all, which bounds memory; a fast worker may
// hold more of them than a slow one, whose task is the head the others
// wait for.
func (m *ServiceMachine) assign(box *Outbox) {
	if m.Out.Fail != nil || m.Out.Closed {
		return
	}
	if len(m.running) != len(m.Workers) {
		m.running = make([]int, len(m.Workers))
	}
	running := m.running
	clear(running)
	held := 0
	for _, t := range m.tasks[m.head:] {
		if t.worker >= 0 {
			held++
			if !t.complete {
				running[t.worker]++
			}
		}
	}
	for _, t := range m.tasks[m.head:] {
		if t.complete || t.worker >= 0 {
			continue
		}
		// The head task goes to a worker even past the bound: the tasks
		// held wait for it to be handed on (a lost worker's tasks are
		// taken back while the others hold later ones).
		head := t == m.tasks[m.head]
		if held >= len(m.Workers)*m.Tasks && !head {
			return
		}
		w := m.leastBusy(running, head)
		if w < 0 {
			return
		}
		t.worker, t.attempt = w, t.attempt+1
		t.granted = uint64(t.handed) + uint64(m.Credit)
		held++
		running[w]++
		m.send(box, t)
	}
}

// leastBusy is the live worker that runs the fewest tasks, below Tasks
// (any number for the head), the one that delivered most batches among
// equals; -1 when none.
func (m *ServiceMachine) leastBusy(running []int, head bool) int {
	w := -1
	now := m.Now()
	for i, x := range m.Workers {
		if !x.alive || now.Before(x.busy) || (running[i] >= m.Tasks && !head) {
			continue
		}
		if w < 0 || running[i] < running[w] || (running[i] == running[w] && x.Batches > m.Workers[w].Batches) {
			w = i
		}
	}
	return w
}

// send gives task t's current attempt to its worker, from the batches not
// taken in yet, with the credit it has.
func (m *ServiceMachine) send(box *Outbox, t *Task) {
	w := m.Workers[t.worker]
	t.sentAt = m.Now()
	skip := t.expected()
	box.Put(w.PID, &messages.ServiceTask{Session: w.session, Task: t.ID, Attempt: t.attempt, Skip: skip, Job: m.Job, State: t.State,
		Credit: uint32(t.granted - uint64(skip)), BeatMs: (m.Lease / 4).Milliseconds()})
}

// reconcile compares the attempts worker w says it runs (msg) with those
// it was given. The remote is at most once, so: an attempt that is not
// current is dropped; a current one that sent more than was taken in lost
// batches on the way, and is handed out again; a current one it runs is
// told its credit again (a ServiceCredit may have been lost); a current
// one it does not run, given over half a lease ago, is given again from
// what was taken in (its ServiceTask, or its end, was lost).
//
// A worker runs at most the pass's tasks, and while a pass begins a few of
// the last one's (Tasks): entries past that many go unanswered, so that a
// heartbeat listing attempts never given cannot make the client send
// without bound. Those of a stale pass still running come up again in the
// next heartbeat.
func (m *ServiceMachine) reconcile(box *Outbox, w *Worker, msg *messages.ServiceHeartbeat) {
	runs := map[uint64]bool{}
	limit := min(len(msg.Tasks), len(msg.Attempts), len(m.tasks)+m.Tasks)
	for i, id := range msg.Tasks[:limit] {
		_, t := m.attempt(msg.Session, id, msg.Attempts[i])
		switch {
		case t == nil:
			box.Put(w.PID, &messages.ServiceDrop{Session: msg.Session, Task: id, Attempt: msg.Attempts[i]})
		case i < len(msg.Sent) && msg.Sent[i] > t.expected() && !t.ended:
			m.requeue(t) // batches it sent were lost on the way
			box.Put(w.PID, &messages.ServiceDrop{Session: msg.Session, Task: id, Attempt: msg.Attempts[i]})
		case !t.ended:
			runs[id] = true
			box.Put(w.PID, &messages.ServiceCredit{Session: msg.Session, Task: id, Attempt: t.attempt, Granted: t.granted})
		default:
			runs[id] = true
		}
	}
	now := m.Now()
	for _, t := range m.tasks[m.head:] {
		if t.worker >= 0 && m.Workers[t.worker] == w && !t.complete && !runs[t.ID] && now.Sub(t.sentAt) > m.Lease/2 {
			m.send(box, t)
		}
	}
}

// grant tops up the credit of every attempt in flight to Credit batches
// past what was handed on, in steps of at least half of it.
func (m *ServiceMachine) grant(box *Outbox) {
	step := uint64(DemandStep(m.Credit))
	for _, t := range m.tasks[m.head:] {
		if t.worker < 0 || t.ended {
			continue
		}
		if want := uint64(t.handed) + uint64(m.Credit); want >= t.granted+step {
			t.granted = want
			w := m.Workers[t.worker]
			box.Put(w.PID, &messages.ServiceCredit{Session: w.session, Task: t.ID, Attempt: t.attempt, Granted: want})
		}
	}
}
