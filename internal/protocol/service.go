package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

var (
	// ErrNoWorkers is wrapped when a service pipeline had no worker alive
	// for WaitForWorkers with tasks left. Package actors gives it as
	// actors.ErrNoWorkers.
	ErrNoWorkers = errors.New("actors: no worker of the service is alive")
	// ErrBadSpec is wrapped when a pipeline spec is invalid; a worker
	// refusing the pipeline's session says so. Package actors gives it as
	// actors.ErrBadSpec.
	ErrBadSpec = errors.New("actors: invalid pipeline spec")
)

// ServiceMachine is the data service's client (docs/distributed.md): it
// cuts each pass into tasks, hands them to the workers in sessions under
// leases, takes their batches back under credit, fences every attempt
// that is not its task's current one, and hands the batches on to its
// subscriber in the order. The remote is at most once, so a lost batch,
// task or credit is found by counting and its task handed out again from
// what was handed on: nothing is lost or handed on twice.
//
// Time comes in from outside: Now is read, never slept on, and Tick (sent
// every Lease/4 by the runner) is when leases are checked. What a machine
// asks of its runner besides messages it puts in the outbox too: Watch,
// Unwatch and Probe, addressed to a worker.
type ServiceMachine struct {
	Name string
	// Credit, Tasks, Lease, WaitForWorkers and MaxMessage are actors.Service's.
	Credit, Tasks         int
	Lease, WaitForWorkers time.Duration
	MaxMessage            int
	Capacity              int    // unsent batches the outlet holds at most
	Session               string // names this pipeline's sessions
	Self                  string // the address of the pipeline's own system: a worker there needs no probe
	Job                   *messages.ServiceJob
	Workers               []*Worker
	Plan                  *Plan                              // the items committed before a resume (Skip)
	TasksOf               func(pass uint32) ([]*Task, error) // a pass's tasks, in the order
	Now                   func() time.Time
	Effects               ServiceEffects
	Out                   Outlet

	tasks      []*Task // the pass's
	base       uint64  // the id of tasks[0]
	head       int     // the first task not wholly handed on
	skip       map[uint64]bool
	lonely     time.Time // since when no worker is alive (zero: one is)
	subscribed bool      // a pass was subscribed
	running    []int     // assign's per worker, kept to spare an allocation a message
	credit     []int64   // Load's per worker, likewise
}

// ServiceEffects are what the service machine tells the pipeline: batches
// taken in from a worker (alive from then until handed on or dropped),
// handed on, dropped, and the damaged chunks workers skipped.
type ServiceEffects struct {
	Arrived, HandedOn, Dropped func(*messages.Batch)
	Corrupt                    func([]*messages.CorruptChunk)
}

func (e ServiceEffects) call(f func(*messages.Batch), b *messages.Batch) {
	if f != nil {
		f(b)
	}
}

// Tick is the runner's prompt to check the workers' leases.
type Tick struct{}

// Watch and Unwatch ask the runner to watch a worker's node (its loss
// comes back as *actor.Terminated) or to stop.
type (
	Watch   struct{}
	Unwatch struct{}
)

// Probe asks the runner to try a TCP connection to a worker that is not
// alive, apart from the machine; Probed is the answer.
type Probe struct{ Worker *Worker }

// Probed says whether a worker's address took a connection.
type Probed struct {
	Worker *Worker
	OK     bool
}

// WorkerFailure is a worker's report that its task failed: its stage
// error, which fails the pipeline.
type WorkerFailure struct {
	File   string
	Offset int64
	Class  messages.ErrorClass
	Err    error
}

func (e *WorkerFailure) Error() string { return e.Err.Error() }
func (e *WorkerFailure) Unwrap() error { return e.Err }

// Step takes one message: the subscriber's, a worker's, a Tick, a Probed
// or the *actor.Terminated of a watched worker. An error has failed the
// link to the subscriber.
func (m *ServiceMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	more, err := m.step(box, from, msg)
	if err != nil {
		m.fail(box, err)
		return err
	}
	if more {
		m.progress(box)
	}
	return nil
}

func (m *ServiceMachine) step(box *Outbox, from *actor.PID, msg any) (bool, error) {
	switch msg := msg.(type) {
	case *messages.Subscribe, *messages.Demand, *messages.Cancel:
		ev, err := m.Out.Step(from, msg)
		if err == nil && ev == OutletBegin {
			err = m.begin(box)
		}
		if err != nil {
			return false, err
		}
		if ev == OutletCancel {
			m.Close(box)
			return false, nil
		}
	case Tick:
		return true, m.checkLeases(box)
	case Probed:
		m.onProbed(box, msg)
	case *actor.Terminated:
		for _, w := range m.Workers {
			if w.PID.Equal(msg.Who) && w.alive {
				m.lose(w, fmt.Sprintf("its node is gone (%s)", msg.Why))
			}
		}
	default:
		return true, m.onWorker(box, msg)
	}
	return true, nil
}

// Start says hello to every worker, on every start of the stage.
func (m *ServiceMachine) Start(box *Outbox) {
	for _, w := range m.Workers {
		m.hello(box, w)
	}
	m.progress(box)
}

// Restarted starts every attempt in flight again, fenced, from what was
// handed on: the message that failed the stage was lost, whatever it was.
func (m *ServiceMachine) Restarted(*Outbox) {
	for _, t := range m.tasks[m.head:] {
		if t.worker >= 0 && !t.complete {
			m.requeue(t)
		}
	}
}

// progress hands on what it can, then hands out tasks and credit.
// Handing on pauses at Capacity unsent items, and what flush sends frees
// room: it hands on again until nothing more goes, since the batches queued
// here bring no message that would prompt it.
func (m *ServiceMachine) progress(box *Outbox) {
	for {
		m.handOn()
		sent := m.Out.Sent
		m.Out.Flush(box)
		if m.Out.Sent == sent {
			break
		}
	}
	m.assign(box)
	m.grant(box)
}

// begin starts the pass the subscriber subscribed for: every session ends
// (the workers drop what they run of the last pass) and the new pass is
// cut into tasks.
func (m *ServiceMachine) begin(box *Outbox) error {
	m.subscribed = true
	m.Close(box)
	for _, t := range m.tasks {
		for _, b := range t.queue {
			m.Effects.call(m.Effects.Dropped, b)
		}
	}
	pass := m.Out.Pass
	tasks, err := m.TasksOf(pass)
	if err != nil {
		return err
	}
	m.tasks, m.head, m.skip = tasks, 0, map[uint64]bool{}
	if len(tasks) > 0 {
		m.base = tasks[0].ID
	}
	if m.Plan != nil {
		for _, pos := range m.Plan.Skip(pass) {
			m.skip[pos] = true
		}
	}
	for _, w := range m.Workers {
		m.hello(box, w)
	}
	return nil
}

// fail ends the link to the subscriber with err.
func (m *ServiceMachine) fail(box *Outbox, err error) {
	m.Out.Fail = Failure(m.Name, "", -1, err)
	m.Out.Flush(box)
}

// Load is what the stage holds (its outlet's and the tasks' batches) and
// the credit its workers have; it also counts each worker's (WorkerCredit).
func (m *ServiceMachine) Load() (held int, demand int64) {
	held = m.Out.Held()
	if len(m.credit) != len(m.Workers) {
		m.credit = make([]int64, len(m.Workers))
	}
	clear(m.credit)
	for _, t := range m.tasks[m.head:] {
		held += len(t.queue)
		if t.worker >= 0 && !t.ended {
			n := int64(t.granted) - int64(t.expected())
			demand += n
			m.credit[t.worker] += n
		}
	}
	return held, demand
}

// WorkerCredit is how many batches worker i may send now, as the last
// Load counted.
func (m *ServiceMachine) WorkerCredit(i int) int64 {
	if i >= len(m.credit) {
		return 0
	}
	return m.credit[i]
}
