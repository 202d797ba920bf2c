package protocol

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorfeed/actorfeed/messages"
)

// The states of a Worker.
const (
	WorkerAlive  = "alive"
	WorkerLost   = "lost"
	WorkerClosed = "closed"
)

// Worker is one worker as the service machine sees it.
type Worker struct {
	Addr string
	PID  *actor.PID
	// What the pipeline shows of it (actors.ServiceWorker): batches and
	// bytes on the wire taken in, tasks completed, times taken for lost
	// and why last, tasks taken back from it.
	Batches, Bytes, Taken, Lost, Reassigned int64
	Why                                     string

	gen     int    // sessions with it so far: a lost worker comes back in a new one
	session string // the current one
	alive   bool
	closed  bool      // alive when its session was closed
	probing bool      // a probe of its address is under way
	busy    time.Time // until when it said it is busy: no task goes to it
	heard   time.Time // the last message of the current session
	hello   time.Time // the last ServiceHello sent
}

// State is WorkerAlive, WorkerLost (taken for lost, or never reached, and
// not back) or WorkerClosed (alive when the pipeline ended its session).
func (w *Worker) State() string {
	switch {
	case w.alive:
		return WorkerAlive
	case w.closed:
		return WorkerClosed
	}
	return WorkerLost
}

// onWorker takes a worker's message: a batch, the end of an attempt or a
// heartbeat. Messages of an ended session or of an attempt that is not its
// task's current one are dropped.
func (m *ServiceMachine) onWorker(box *Outbox, msg any) error {
	switch msg := msg.(type) {
	case *messages.ServiceHeartbeat:
		if w := m.worker(msg.Session); w != nil {
			if !w.alive {
				w.alive, m.lonely = true, time.Time{}
				box.Put(w.PID, Watch{})
			}
			w.heard = m.Now()
			m.reconcile(box, w, msg)
		}
	case *messages.ServiceBatch:
		return m.onBatch(msg)
	case *messages.ServiceBusy:
		return m.onBusy(box, msg)
	case *messages.ServiceTaskEnd:
		return m.onTaskEnd(msg)
	}
	return nil
}

// onBatch takes a batch of an attempt, in its order, or takes the attempt
// back when one before it was lost on the way. A batch past the attempt's
// credit breaks the protocol: no honest worker sends it, and taking it
// in would let a worker fill the pipeline's memory.
func (m *ServiceMachine) onBatch(msg *messages.ServiceBatch) error {
	w, t := m.attempt(msg.Session, msg.Task, msg.Attempt)
	if t == nil {
		return nil
	}
	w.heard = m.Now()
	if uint64(msg.Index) >= t.granted {
		return fmt.Errorf("%w: worker %s sent batch %d of task %d, past its credit of %d: are the worker and this pipeline the same version of actorfeed?",
			ErrProtocol, w.Addr, msg.Index, t.ID, t.granted)
	}
	if msg.Index != t.expected() || msg.Batch == nil {
		// A batch of the attempt was lost on the way (the remote is at
		// most once): the attempt starts again from what was handed on.
		m.requeue(t)
		return nil
	}
	b := msg.Batch
	w.Batches++
	w.Bytes += int64(proto.Size(b))
	if !t.Tail {
		b.Position += t.Lo
	}
	b.OrderPass, b.Pass = m.Out.Pass, m.Out.Pass
	t.queue = append(t.queue, b)
	m.Effects.call(m.Effects.Arrived, b)
	return nil
}

// onTaskEnd takes the end of an attempt: complete when every batch it
// made was taken in, handed out again when some were lost on the way.
func (m *ServiceMachine) onTaskEnd(msg *messages.ServiceTaskEnd) error {
	w, t := m.attempt(msg.Session, msg.Task, msg.Attempt)
	if t == nil {
		return nil
	}
	w.heard = m.Now()
	if f := msg.Failure; f != nil {
		return &WorkerFailure{File: f.File, Offset: f.Offset, Class: f.Class, Err: fmt.Errorf("worker %s: %s", w.Addr, f.Cause)}
	}
	t.ended, t.batches, t.skipped = true, msg.Batches, msg.Skipped
	if m.Effects.Corrupt != nil && len(msg.Corrupt) > 0 {
		m.Effects.Corrupt(msg.Corrupt)
	}
	if t.expected() != t.batches {
		m.requeue(t) // batches were lost on the way
		return nil
	}
	t.complete = true
	w.Taken++
	return nil
}

// onBusy takes a worker's refusal, which fails the pipeline (the two
// sides disagree), or its saying it is busy: the task it did not take
// goes back to be handed out, and the worker is given none for a quarter
// of a lease.
func (m *ServiceMachine) onBusy(box *Outbox, msg *messages.ServiceBusy) error {
	w := m.worker(msg.Session)
	if w == nil {
		return nil
	}
	if msg.Refused {
		return fmt.Errorf("%w: worker %s refused this pipeline's session: %s", ErrBadSpec, w.Addr, msg.Reason)
	}
	w.busy, w.Why = m.Now().Add(m.Lease/4), msg.Reason
	if msg.Attempt == 0 { // a hello: no session was opened
		return nil
	}
	_, t := m.attempt(msg.Session, msg.Task, msg.Attempt)
	if t == nil {
		return nil
	}
	m.requeue(t)
	if m.head < len(m.tasks) && t == m.tasks[m.head] {
		m.makeRoom(box, w)
	}
	return nil
}

// worker is the worker whose current session is session.
func (m *ServiceMachine) worker(session string) *Worker {
	for _, w := range m.Workers {
		if w.session == session {
			return w
		}
	}
	return nil
}

// lose takes worker w for lost: its tasks go back to be handed to others,
// and its session ends; it may come back in a new one.
func (m *ServiceMachine) lose(w *Worker, why string) {
	w.alive, w.Why = false, why
	w.Lost++
	w.session = "" // what comes of the old session is not its

	// Nothing is sent to a lost worker, not even an Unwatch: a message to
	// an address that does not answer makes the remote dial it five times
	// and keep every failed gRPC connection (the pinned protoactor-go
	// never closes them). Its session ends on its side with its lease.
	for _, t := range m.tasks {
		if t.worker >= 0 && m.Workers[t.worker] == w && !t.complete {
			m.requeue(t)
		}
	}
	if m.lonely.IsZero() && !m.anyAlive() {
		m.lonely = m.Now()
	}
}

func (m *ServiceMachine) anyAlive() bool {
	for _, w := range m.Workers {
		if w.alive {
			return true
		}
	}
	return false
}

// hello opens a new session with w (or keeps the current one alive, when
// w is alive): the worker answers with a heartbeat.
// A worker that is not alive is first probed with a TCP connection, apart
// from the machine (see lose for why nothing is sent to it unprobed).
func (m *ServiceMachine) hello(box *Outbox, w *Worker) {
	w.hello = m.Now()
	switch {
	case w.alive:
		box.Put(w.PID, m.helloMsg(w))
	case w.probing:
	case w.Addr == m.Self: // in this very system
		m.onProbed(box, Probed{Worker: w, OK: true})
	default:
		w.probing = true
		box.Put(w.PID, Probe{Worker: w})
	}
}

func (m *ServiceMachine) helloMsg(w *Worker) *messages.ServiceHello {
	return &messages.ServiceHello{Session: w.session, LeaseMs: m.Lease.Milliseconds(), MaxMessage: int64(m.MaxMessage)}
}

// onProbed opens a new session with a worker whose address answered.
func (m *ServiceMachine) onProbed(box *Outbox, p Probed) {
	w := p.Worker
	w.probing = false
	if !p.OK || w.alive || m.Out.Closed {
		return
	}
	w.gen++
	w.session = fmt.Sprintf("%s/%s/%d", m.Session, w.Addr, w.gen)
	box.Put(w.PID, m.helloMsg(w))
}

// Close ends every session: a worker stops what it runs of them.
func (m *ServiceMachine) Close(box *Outbox) {
	for _, w := range m.Workers {
		if w.alive {
			box.Put(w.PID, &messages.ServiceClose{Session: w.session})
			box.Put(w.PID, Unwatch{})
		}
		w.closed = w.closed || w.alive
		w.alive = false
	}
	if m.lonely.IsZero() {
		m.lonely = m.Now()
	}
}

// checkLeases takes workers unheard for a lease for lost, keeps the live
// ones' sessions alive, asks lost ones to come back, and fails the pipeline
// once no worker was alive for WaitForWorkers with tasks left.
func (m *ServiceMachine) checkLeases(box *Outbox) error {
	now := m.Now()
	for _, w := range m.Workers {
		if w.alive && now.Sub(w.heard) > m.Lease {
			m.lose(w, fmt.Sprintf("not heard from for %v", m.Lease))
		}
		if w.alive || now.Sub(w.hello) >= m.Lease/2 {
			m.hello(box, w)
		}
	}
	if !m.subscribed || m.head == len(m.tasks) || m.anyAlive() {
		return nil
	}
	if now.Sub(m.lonely) > m.WaitForWorkers {
		return fmt.Errorf("%w: %d of %d tasks left, none of %d workers answered for %v", ErrNoWorkers,
			len(m.tasks)-m.head, len(m.tasks), len(m.Workers), m.WaitForWorkers)
	}
	return nil
}
