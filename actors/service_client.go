package actors

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/internal/ticker"
	"github.com/actorfeed/actorfeed/messages"
)

// serviceTick prompts the service stage to check its workers' leases.
type serviceTick struct{}

type serviceActor struct {
	c    *serviceCell
	tick *ticker.Ticker
}

func (a *serviceActor) Receive(ctx actor.Context) {
	c := a.c
	defer a.gauge()
	msg, box := c.receive(ctx)
	defer c.post()
	switch m := msg.(type) {
	case *actor.Started:
		a.onStarted(ctx, box)
	case *actor.Restarting:
		a.tick.Stop()
		return
	case *actor.Stopping:
		a.tick.Stop()
		a.closeSessions(ctx)
		c.probes.Wait() // within their dial timeout
		return
	case probed:
		a.onProbed(ctx, m)
	case *messages.Subscribe, *messages.Demand, *messages.Cancel:
		ev, err := c.out.Step(ctx.Sender(), m)
		if err == nil && ev == protocol.OutletBegin {
			err = a.begin(ctx)
		}
		if err != nil {
			a.fail(box, err)
			return
		}
		if ev == protocol.OutletCancel {
			a.closeSessions(ctx)
			return
		}
	case serviceTick:
		if err := a.checkLeases(ctx); err != nil {
			a.fail(box, err)
			return
		}
	case *actor.Terminated:
		for _, w := range c.workers {
			if w.pid.Equal(m.Who) && w.alive {
				a.lose(ctx, w, fmt.Sprintf("its node is gone (%s)", m.Why))
			}
		}
	default:
		if err := a.onWorker(ctx, msg); err != nil {
			a.fail(box, err)
			return
		}
	}
	// The workers' snapshot is taken before the pass's end can be handed
	// on, so that one who sees the pass end sees its last task counted.
	a.gauge()
	a.progress(ctx, box)
}

// onStarted starts the lease ticks and says hello to every worker; after a
// restart, the message being handled is lost: whatever it was, every
// attempt in flight starts again, fenced, from what was handed on.
func (a *serviceActor) onStarted(ctx actor.Context, box *protocol.Outbox) {
	c := a.c
	a.tick = ticker.Start(ctx.ActorSystem().Root, c.cfg.Lease/4, ctx.Self(), serviceTick{})
	if c.restarted() {
		for _, t := range c.tasks[c.head:] {
			if t.worker >= 0 && !t.complete {
				a.requeue(t)
			}
		}
		c.announce(box)
	}
	for _, w := range c.workers {
		a.hello(ctx, w)
	}
}

// progress hands on what it can, then hands out tasks and credit.
// Handing on pauses at Capacity unsent items, and what flush sends frees
// room: it hands on again until nothing more goes, since the batches queued
// here bring no message that would prompt it.
func (a *serviceActor) progress(ctx actor.Context, box *protocol.Outbox) {
	c := a.c
	for {
		a.handOn()
		sent := c.out.Sent
		c.out.Flush(box)
		if c.out.Sent == sent {
			break
		}
	}
	a.assign(ctx)
	a.grant(ctx)
}

// begin starts the pass the double buffer subscribed for: every session
// ends (the workers drop what they run of the last pass) and the new pass
// is cut into tasks.
func (a *serviceActor) begin(ctx actor.Context) error {
	c := a.c
	c.subscribed = true
	a.closeSessions(ctx)
	for _, t := range c.tasks {
		for _, b := range t.queue {
			c.pipe.discard(b)
		}
	}
	pass := c.out.Pass
	tasks, err := c.tasksOf(pass)
	if err != nil {
		return err
	}
	c.tasks, c.head, c.skip = tasks, 0, map[uint64]bool{}
	if len(tasks) > 0 {
		c.base = tasks[0].id
	}
	for _, pos := range c.plan.Skip(pass) {
		c.skip[pos] = true
	}
	for _, w := range c.workers {
		a.hello(ctx, w)
	}
	return nil
}

// onWorker takes a worker's message: a batch, the end of an attempt or a
// heartbeat. Messages of an ended session or of an attempt that is not its
// task's current one are dropped.
func (a *serviceActor) onWorker(ctx actor.Context, msg any) error {
	c := a.c
	switch m := msg.(type) {
	case *messages.ServiceHeartbeat:
		if w := c.worker(m.Session); w != nil {
			if !w.alive {
				w.alive, c.lonely = true, time.Time{}
				ctx.Watch(w.pid)
			}
			w.heard = time.Now()
			a.reconcile(ctx, w, m)
		}
	case *messages.ServiceBatch:
		w, t := c.attempt(m.Session, m.Task, m.Attempt)
		if t == nil {
			return nil
		}
		w.heard = time.Now()
		if m.Index != t.expected() || m.Batch == nil {
			// A batch of the attempt was lost on the way (the remote is at
			// most once): the attempt starts again from what was handed on.
			a.requeue(t)
			return nil
		}
		b := m.Batch
		w.batches++
		w.bytes += int64(proto.Size(b))
		if !t.tail {
			b.Position += t.lo
		}
		b.OrderPass, b.Pass = c.out.Pass, c.out.Pass
		t.queue = append(t.queue, b)
		c.pipe.noteProduced(KindBatch, b) // the workers' batch stage made it; alive here until consumed or dropped
	case *messages.ServiceBusy:
		return a.onBusy(ctx, m)
	case *messages.ServiceTaskEnd:
		w, t := c.attempt(m.Session, m.Task, m.Attempt)
		if t == nil {
			return nil
		}
		w.heard = time.Now()
		if f := m.Failure; f != nil {
			err := fmt.Errorf("worker %s: %s", w.addr, f.Cause)
			c.pipe.record(c.name, &StageError{Stage: c.name, File: f.File, Offset: f.Offset, Record: -1, Class: f.Class, Err: err})
			return err
		}
		t.ended, t.batches, t.skipped = true, m.Batches, m.Skipped
		a.noteCorrupt(m.Corrupt)
		if t.expected() != t.batches {
			a.requeue(t) // batches were lost on the way
			return nil
		}
		t.complete = true
		w.taken++
	}
	return nil
}

// onBusy takes a worker's refusal, which fails the pipeline (the two
// sides disagree), or its saying it is busy: the task it did not take
// goes back to be handed out, and the worker is given none for a quarter
// of a lease.
func (a *serviceActor) onBusy(ctx actor.Context, m *messages.ServiceBusy) error {
	c := a.c
	w := c.worker(m.Session)
	if w == nil {
		return nil
	}
	if m.Refused {
		return fmt.Errorf("%w: worker %s refused this pipeline's session: %s", ErrBadSpec, w.addr, m.Reason)
	}
	w.busy, w.why = time.Now().Add(c.cfg.Lease/4), m.Reason
	if m.Attempt == 0 { // a hello: no session was opened
		return nil
	}
	_, t := c.attempt(m.Session, m.Task, m.Attempt)
	if t == nil {
		return nil
	}
	a.requeue(t)
	if c.head < len(c.tasks) && t == c.tasks[c.head] {
		a.makeRoom(ctx, w)
	}
	return nil
}

// makeRoom takes back a task that w runs past the head, when w refused
// the head task as busy: the tasks past the head wait for credit that
// only the head's batches bring, so a worker whose room they fill would
// never take the head, and the pass would hang.
func (a *serviceActor) makeRoom(ctx actor.Context, w *svcWorker) {
	c := a.c
	for i := len(c.tasks) - 1; i > c.head; i-- {
		t := c.tasks[i]
		if t.worker >= 0 && c.workers[t.worker] == w && !t.complete && !t.ended {
			ctx.Send(w.pid, &messages.ServiceDrop{Session: w.session, Task: t.id, Attempt: t.attempt})
			a.requeue(t)
			return
		}
	}
}

// noteCorrupt lists the damaged chunks a worker skipped as the pipeline's
// own, named by the pipeline's file names.
func (a *serviceActor) noteCorrupt(list []*messages.CorruptChunk) {
	files := a.c.files
	for _, cc := range list {
		if files == nil || int(cc.File) >= len(files.names) {
			continue // not a file of the job: nothing to name
		}
		a.c.pipe.corrupt.note(CorruptChunk{File: files.names[cc.File], Offset: cc.Offset, Records: int(cc.Records), Err: errors.New(cc.Cause)})
	}
}

// worker is the worker whose current session is session.
func (c *serviceCell) worker(session string) *svcWorker {
	for _, w := range c.workers {
		if w.session == session {
			return w
		}
	}
	return nil
}

// attempt is the task and its worker that a message of an attempt is
// for, or nil when the attempt is not current (fenced).
func (c *serviceCell) attempt(session string, id uint64, attempt uint32) (*svcWorker, *svcTask) {
	w := c.worker(session)
	if w == nil || !w.alive || id < c.base || id-c.base >= uint64(len(c.tasks)) {
		return nil, nil
	}
	t := c.tasks[id-c.base]
	if t.complete || t.attempt != attempt || t.worker < 0 || c.workers[t.worker] != w {
		return nil, nil
	}
	return w, t
}

// requeue takes task t back from its worker: what it took in and did not
// hand on is dropped, and the next attempt starts after what was handed on.
func (a *serviceActor) requeue(t *svcTask) {
	c := a.c
	for _, b := range t.queue {
		c.pipe.discard(b)
	}
	if t.worker >= 0 {
		c.workers[t.worker].reassigned++
	}
	t.queue, t.worker, t.ended = nil, -1, false
}

// lose takes worker w for lost: its tasks go back to be handed to others,
// and its session ends; it may come back in a new one.
func (a *serviceActor) lose(ctx actor.Context, w *svcWorker, why string) {
	c := a.c
	w.alive, w.why = false, why
	w.lost++
	w.session = "" // what comes of the old session is not its

	// Nothing is sent to a lost worker, not even an Unwatch: a message to
	// an address that does not answer makes the remote dial it five times
	// and keep every failed gRPC connection (the pinned protoactor-go
	// never closes them). Its session ends on its side with its lease.
	for i, t := range c.tasks {
		if t.worker >= 0 && c.workers[t.worker] == w && !t.complete {
			a.requeue(c.tasks[i])
		}
	}
	if c.lonely.IsZero() && !c.anyAlive() {
		c.lonely = time.Now()
	}
}

// state is what ServiceWorker.State says of w.
func (w *svcWorker) state() string {
	switch {
	case w.alive:
		return ServiceWorkerAlive
	case w.closed:
		return ServiceWorkerClosed
	}
	return ServiceWorkerLost
}

func (c *serviceCell) anyAlive() bool {
	for _, w := range c.workers {
		if w.alive {
			return true
		}
	}
	return false
}

// hello opens a new session with w (or keeps the current one alive, when
// w is alive): the worker answers with a heartbeat.
// A worker that is not alive is first probed with a TCP connection, apart
// from the actor (see lose for why nothing is sent to it unprobed).
func (a *serviceActor) hello(ctx actor.Context, w *svcWorker) {
	c := a.c
	w.hello = time.Now()
	if w.alive {
		ctx.Request(w.pid, &messages.ServiceHello{Session: w.session, LeaseMs: c.cfg.Lease.Milliseconds(), MaxMessage: int64(c.cfg.MaxMessage)})
		return
	}
	if w.probing {
		return
	}
	if w.addr == ctx.ActorSystem().Address() { // in this very system
		a.onProbed(ctx, probed{w: w, ok: true})
		return
	}
	w.probing = true
	self, root, timeout := ctx.Self(), ctx.ActorSystem().Root, min(c.cfg.Lease/2, time.Second)
	c.probes.Go(func() {
		conn, err := net.DialTimeout("tcp", w.addr, timeout)
		if err == nil {
			conn.Close()
		}
		root.Send(self, probed{w: w, ok: err == nil})
	})
}

// probed says whether a worker's address took a connection.
type probed struct {
	w  *svcWorker
	ok bool
}

// onProbed opens a new session with a worker whose address answered.
func (a *serviceActor) onProbed(ctx actor.Context, m probed) {
	c := a.c
	w := m.w
	w.probing = false
	if !m.ok || w.alive || c.out.Closed {
		return
	}
	w.gen++
	w.session = fmt.Sprintf("%s/%s/%d", c.id, w.addr, w.gen)
	ctx.Request(w.pid, &messages.ServiceHello{Session: w.session, LeaseMs: c.cfg.Lease.Milliseconds(), MaxMessage: int64(c.cfg.MaxMessage)})
}

// closeSessions ends every session: a worker stops what it runs of them.
func (a *serviceActor) closeSessions(ctx actor.Context) {
	for _, w := range a.c.workers {
		if w.alive {
			ctx.Send(w.pid, &messages.ServiceClose{Session: w.session})
			ctx.Unwatch(w.pid)
		}
		w.closed = w.closed || w.alive
		w.alive = false
	}
	if a.c.lonely.IsZero() {
		a.c.lonely = time.Now()
	}
}

// checkLeases takes workers unheard for a lease for lost, keeps the live
// ones' sessions alive, asks lost ones to come back, and fails the pipeline
// once no worker was alive for WaitForWorkers with tasks left.
func (a *serviceActor) checkLeases(ctx actor.Context) error {
	c := a.c
	now := time.Now()
	for _, w := range c.workers {
		if w.alive && now.Sub(w.heard) > c.cfg.Lease {
			a.lose(ctx, w, fmt.Sprintf("not heard from for %v", c.cfg.Lease))
		}
		if w.alive || now.Sub(w.hello) >= c.cfg.Lease/2 {
			a.hello(ctx, w)
		}
	}
	if !c.subscribed || c.head == len(c.tasks) || c.anyAlive() {
		return nil
	}
	if now.Sub(c.lonely) > c.cfg.WaitForWorkers {
		return fmt.Errorf("%w: %d of %d tasks left, none of %d workers answered for %v", ErrNoWorkers,
			len(c.tasks)-c.head, len(c.tasks), len(c.workers), c.cfg.WaitForWorkers)
	}
	return nil
}

// handOn moves the head task's batches to the outlet, in the order, while
// it has room; a task wholly handed on makes the next one the head. Once
// every task is, the pass ends.
func (a *serviceActor) handOn() {
	c := a.c
	for c.subscribed && c.out.Fail == nil && c.out.End == nil && c.out.Unsent() < c.capacity {
		if c.head == len(c.tasks) {
			var skipped uint64
			for _, t := range c.tasks {
				skipped += t.skipped
			}
			c.out.End = &messages.End{Pass: c.out.Pass, Count: c.out.Produced(), Skipped: skipped}
			return
		}
		t := c.tasks[c.head]
		if len(t.queue) == 0 {
			if !t.complete {
				return
			}
			c.head++
			continue
		}
		b := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.handed++
		if c.skip[b.Position] { // committed before the pipeline resumed
			c.pipe.discard(b)
			continue
		}
		c.out.Push(b)
		c.meter.items.Add(1)
	}
}

// assign hands the tasks no worker holds, first in the order, to the live
// workers that run fewer than Service.Tasks, the least busy first, then
// the one that delivered most: a worker that finishes sooner is given
// more. Tasks held (running, or complete and waiting to be handed on in
// the order) are at most Tasks per worker in all, which bounds memory; a
// fast worker may hold more of them than a slow one, whose task is the
// head the others wait for.
func (a *serviceActor) assign(ctx actor.Context) {
	c := a.c
	if c.out.Fail != nil || c.out.Closed {
		return
	}
	if len(c.running) != len(c.workers) {
		c.running = make([]int, len(c.workers))
	}
	running := c.running
	clear(running)
	held := 0
	for _, t := range c.tasks[c.head:] {
		if t.worker >= 0 {
			held++
			if !t.complete {
				running[t.worker]++
			}
		}
	}
	for _, t := range c.tasks[c.head:] {
		if t.complete || t.worker >= 0 {
			continue
		}
		// The head task goes to a worker even past the bound: the tasks
		// held wait for it to be handed on (a lost worker's tasks are
		// taken back while the others hold later ones).
		head := t == c.tasks[c.head]
		if held >= len(c.workers)*c.cfg.Tasks && !head {
			return
		}
		w := a.leastBusy(running, head)
		if w < 0 {
			return
		}
		t.worker, t.attempt = w, t.attempt+1
		t.granted = uint64(t.handed) + uint64(c.cfg.Credit)
		held++
		running[w]++
		a.send(ctx, t)
	}
}

// leastBusy is the live worker that runs the fewest tasks, below Tasks
// (any number for the head), the one that delivered most batches among
// equals; -1 when none.
func (a *serviceActor) leastBusy(running []int, head bool) int {
	w := -1
	now := time.Now()
	for i, x := range a.c.workers {
		if !x.alive || now.Before(x.busy) || (running[i] >= a.c.cfg.Tasks && !head) {
			continue
		}
		if w < 0 || running[i] < running[w] || (running[i] == running[w] && x.batches > a.c.workers[w].batches) {
			w = i
		}
	}
	return w
}

// send gives task t's current attempt to its worker, from the batches not
// taken in yet, with the credit it has.
func (a *serviceActor) send(ctx actor.Context, t *svcTask) {
	c := a.c
	w := c.workers[t.worker]
	t.sentAt = time.Now()
	skip := t.expected()
	ctx.Request(w.pid, &messages.ServiceTask{Session: w.session, Task: t.id, Attempt: t.attempt, Skip: skip, Job: c.job, State: t.state,
		Credit: uint32(t.granted - uint64(skip)), BeatMs: (c.cfg.Lease / 4).Milliseconds()})
}

// reconcile compares the attempts worker w says it runs (m) with those it
// was given. The remote is at most once, so: an attempt that is not
// current is dropped; a current one that sent more than was taken in lost
// batches on the way, and is handed out again; a current one it runs is
// told its credit again (a ServiceCredit may have been lost); a current
// one it does not run, given over half a lease ago, is given again from
// what was taken in (its ServiceTask, or its end, was lost).
func (a *serviceActor) reconcile(ctx actor.Context, w *svcWorker, m *messages.ServiceHeartbeat) {
	c := a.c
	runs := map[uint64]bool{}
	for i, id := range m.Tasks {
		if i >= len(m.Attempts) {
			break
		}
		_, t := c.attempt(m.Session, id, m.Attempts[i])
		switch {
		case t == nil:
			ctx.Send(w.pid, &messages.ServiceDrop{Session: m.Session, Task: id, Attempt: m.Attempts[i]})
		case i < len(m.Sent) && m.Sent[i] > t.expected() && !t.ended:
			a.requeue(t) // batches it sent were lost on the way
			ctx.Send(w.pid, &messages.ServiceDrop{Session: m.Session, Task: id, Attempt: m.Attempts[i]})
		case !t.ended:
			runs[id] = true
			ctx.Send(w.pid, &messages.ServiceCredit{Session: m.Session, Task: id, Attempt: t.attempt, Granted: t.granted})
		default:
			runs[id] = true
		}
	}
	for _, t := range c.tasks[c.head:] {
		if t.worker >= 0 && c.workers[t.worker] == w && !t.complete && !runs[t.id] && time.Since(t.sentAt) > c.cfg.Lease/2 {
			a.send(ctx, t)
		}
	}
}

// grant tops up the credit of every attempt in flight to Credit batches
// past what was handed on, in steps of at least half of it.
func (a *serviceActor) grant(ctx actor.Context) {
	c := a.c
	step := uint64(protocol.DemandStep(c.cfg.Credit))
	for _, t := range c.tasks[c.head:] {
		if t.worker < 0 || t.ended {
			continue
		}
		if want := uint64(t.handed) + uint64(c.cfg.Credit); want >= t.granted+step {
			t.granted = want
			w := c.workers[t.worker]
			ctx.Send(w.pid, &messages.ServiceCredit{Session: w.session, Task: t.id, Attempt: t.attempt, Granted: want})
		}
	}
}

// fail ends the link to the double buffer with err.
func (a *serviceActor) fail(box *protocol.Outbox, err error) {
	c := a.c
	c.pipe.record(c.name, err)
	c.out.Fail = protocol.Failure(c.name, "", -1, err)
	c.out.Flush(box)
}

func (a *serviceActor) gauge() {
	c := a.c
	held := c.out.Held()
	var demand int64
	if len(c.credit) != len(c.workers) {
		c.credit = make([]int64, len(c.workers))
	}
	clear(c.credit)
	for _, t := range c.tasks[c.head:] {
		held += len(t.queue)
		if t.worker >= 0 && !t.ended {
			n := int64(t.granted) - int64(t.expected())
			demand += n
			c.credit[t.worker] += n
		}
	}
	c.meter.gauge(held, demand)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap = c.snap[:0]
	for i, w := range c.workers {
		c.snap = append(c.snap, ServiceWorker{Addr: w.addr, State: w.state(), Batches: w.batches, Bytes: w.bytes, Tasks: w.taken,
			Lost: w.lost, Why: w.why, Reassigned: w.reassigned, Credit: c.credit[i]})
	}
}
