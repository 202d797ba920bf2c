package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/ticker"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/supervisor"
)

// ErrOutsideRoots is wrapped when a task names a file outside the data
// roots a worker was started with: the worker opens none of its files.
var ErrOutsideRoots = errors.New("service: the file is outside the worker's data roots")

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Roots are the directories a worker reads files under; a task that
	// names a file outside them (symbolic links resolved) fails.
	Roots []string
	// Threads is how many file readers each task runs; default NumCPU.
	Threads int
	// MaxMessage bounds a batch's bytes on the wire: a larger one fails its
	// task with an error that names the bound. Default
	// actors.DefaultMaxMessage; the node's receive limit must be above it
	// (a Node's is).
	MaxMessage int
	// Open opens files with formats of one's own. By default a worker
	// opens every file through its roots (os.Root), so that no symbolic
	// link, even one swapped in while a task runs, leads it outside them;
	// an Open of one's own is called once the entry's path, its links
	// resolved, was found under a root, and opens it by that path.
	Open func(ctx context.Context, entry string) (readers.Reader, error)
	// Maps are the map functions clients may name (Map.Name, XMap.Name).
	Maps map[string]actors.MapFunc
	// SampleMaps makes the function of a name that Maps lacks, one that
	// sees its samples (Map.Samples): a name with parameters, say, as
	// "decode(size=224)"; nil, or an error, refuses the name.
	SampleMaps func(name string) (actors.SampleMapFunc, error)
	// Limits bound what clients may make the worker hold; zero fields take
	// DefaultWorkerLimits'.
	Limits WorkerLimits
}

// WorkerLimits bound what a worker holds for its clients, per client (a
// trainer's node, by its address) and in all: a client past them is told
// the worker is busy (ServiceBusy) and tries elsewhere or later, and no
// client, however it behaves, makes the worker hold more.
type WorkerLimits struct {
	Sessions, SessionsPerClient int
	// Tasks counts the attempts whose pipelines run, those cancelled and
	// still closing included.
	Tasks, TasksPerClient int
	// Credit bounds the batches one grant lets an attempt send past what
	// it had sent when the grant came: a well-behaved client never grants
	// more than its Service.Credit past what it took in, and one that
	// grants without end unlocks at most this much a grant.
	Credit int
}

// DefaultWorkerLimits are WorkerOptions.Limits' defaults. With
// actors.DefaultMaxMessage, the batches a worker may have sent and not had
// credited back are at most Tasks x Credit x MaxMessage.
var DefaultWorkerLimits = WorkerLimits{Sessions: 256, SessionsPerClient: 16, Tasks: 64, TasksPerClient: 16, Credit: 64}

// withDefaults fills l's zero fields with DefaultWorkerLimits'.
func (l WorkerLimits) withDefaults() WorkerLimits {
	d := DefaultWorkerLimits
	for _, f := range []struct{ v, d *int }{{&l.Sessions, &d.Sessions}, {&l.SessionsPerClient, &d.SessionsPerClient},
		{&l.Tasks, &d.Tasks}, {&l.TasksPerClient, &d.TasksPerClient}, {&l.Credit, &d.Credit}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return l
}

// Worker makes the batches of the tasks Service pipelines send it, each
// task in a pipeline of its own (file readers, open_files, the order's
// shuffle, batch) resumed at the task's positions, and sends them back
// under the credit the client grants (docs/distributed.md).
type Worker struct {
	sys *actor.ActorSystem
	// local runs the tasks' pipelines: one system for all of them, off the
	// network (a system per task is allocated afresh for every task; the
	// cost: docs/performance.md), shut down by Close.
	local *actor.ActorSystem
	// indexes keeps the files' indexes from task to task: each task is a
	// pipeline that would otherwise index every file of its job again.
	indexes *actors.IndexCache
	pid     *actor.PID
	opts    WorkerOptions
	roots   *dataRoots
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once

	// Counters, read by Stats from any goroutine.
	tasks, batches, bytes, failed, busy atomic.Int64

	// running counts the attempts whose goroutines run, by client and in
	// all (under runMu): what Limits.Tasks bounds.
	runMu   sync.Mutex
	running map[string]int
	runAll  int
}

// WorkerStats are a worker's counters.
type WorkerStats struct {
	Sessions int   // open now
	Running  int   // attempts whose pipelines run now, those closing included
	Busy     int64 // hellos and tasks answered busy or refused
	Tasks    int64 // attempts run to their end
	Failed   int64 // attempts that failed
	Batches  int64 // sent
	Bytes    int64 // of the batches sent
	// IndexHits counts the files whose index a task found in the worker's
	// cache (actors.IndexCache) instead of reading it.
	IndexHits int64
}

// StartWorker spawns a worker's actor, named actors.WorkerName, in sys: a
// Node's system, so that clients on other nodes reach it.
func StartWorker(sys *actor.ActorSystem, opts WorkerOptions) (*Worker, error) {
	if opts.Threads <= 0 {
		opts.Threads = runtime.NumCPU()
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = actors.DefaultMaxMessage
	}
	if len(opts.Roots) == 0 {
		return nil, fmt.Errorf("%w: a worker needs at least one data root", actors.ErrBadSpec)
	}
	opts.Limits = opts.Limits.withDefaults()
	roots, err := openDataRoots(opts.Roots)
	if err != nil {
		return nil, err
	}
	w := &Worker{sys: sys, opts: opts, roots: roots}
	w.ctx, w.stop = context.WithCancel(context.Background())
	w.local = actors.NewSystem()
	w.indexes = actors.NewIndexCache(0)
	core := &nodeWorkerActor{w: w, sessions: map[string]*wSession{}, perClient: map[string]int{}}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return core }), actors.WorkerName)
	if err != nil {
		w.stop()
		w.local.Shutdown()
		w.roots.close()
		return nil, fmt.Errorf("service: spawning the worker: %w", err)
	}
	w.pid = pid
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	st := WorkerStats{Tasks: w.tasks.Load(), Failed: w.failed.Load(), Batches: w.batches.Load(), Bytes: w.bytes.Load(), IndexHits: w.indexes.Hits(),
		Busy: w.busy.Load()}
	w.runMu.Lock()
	st.Running = w.runAll
	w.runMu.Unlock()
	if res, err := w.sys.Root.RequestFuture(w.pid, workerSessions{}, time.Second).Result(); err == nil {
		st.Sessions = res.(int)
	}
	return st
}

// Close stops the worker: the actor first, so that no task starts while
// Close waits for the running ones (a task arriving then raced the wait),
// then every task's pipeline is closed (each within its StopGrace).
func (w *Worker) Close() error {
	var err error
	w.once.Do(func() {
		err = w.sys.Root.StopFuture(w.pid).Wait()
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
		w.stop()
		w.wg.Wait()
		w.local.Shutdown()
		w.roots.close() // no task opens files now
	})
	return err
}

// workerSessions asks the worker's actor how many sessions it has.
type workerSessions struct{}

// workerTick prompts heartbeats and the sessions' leases.
type workerTick struct{}

// attemptDone tells the worker's actor an attempt's goroutine ended.
type attemptDone struct {
	session string
	task    uint64
	attempt uint32
}

// wSession is one client's session on the worker.
type wSession struct {
	client   *actor.PID
	from     string // the client's node address, which the limits go by
	heard    time.Time
	lease    time.Duration
	beat     time.Duration
	beaten   time.Time
	attempts map[uint64]*wAttempt
}

// wAttempt is an attempt at a task running on the worker.
type wAttempt struct {
	attempt uint32
	cancel  context.CancelFunc
	sent    atomic.Uint32 // the index after the last batch sent
	mu      sync.Mutex
	granted uint64
	wake    chan struct{} // closed when granted grows
}

// grant raises the attempt's credit to granted.
func (a *wAttempt) grant(granted uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if granted > a.granted {
		a.granted = granted
		close(a.wake)
		a.wake = make(chan struct{})
	}
}

// await waits until batch index may be sent.
func (a *wAttempt) await(ctx context.Context, index uint64) error {
	for {
		a.mu.Lock()
		ok, wake := index < a.granted, a.wake
		a.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// workerTickEvery is how often the worker looks at its sessions.
const workerTickEvery = 100 * time.Millisecond

type nodeWorkerActor struct {
	w         *Worker
	sessions  map[string]*wSession
	perClient map[string]int // sessions by client address
	ticks     *ticker.Ticker
}

func (a *nodeWorkerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.ticks = ticker.Start(ctx.ActorSystem().Root, workerTickEvery, ctx.Self(), workerTick{})
	case *actor.Restarting:
		a.ticks.Stop()
	case *actor.Stopping:
		a.ticks.Stop()
		for id := range a.sessions {
			a.drop(id)
		}
	case *messages.ServiceHello:
		a.hello(ctx, m)
	case *messages.ServiceTask:
		a.start(ctx, m)
	case *messages.ServiceCredit:
		if s := a.sessions[m.Session]; s != nil {
			s.heard = time.Now()
			if at := s.attempts[m.Task]; at != nil && at.attempt == m.Attempt {
				at.grant(min(m.Granted, uint64(at.sent.Load())+uint64(a.w.opts.Limits.Credit)))
			}
		}
	case *messages.ServiceClose:
		a.drop(m.Session)
	case *messages.ServiceDrop:
		if s := a.sessions[m.Session]; s != nil {
			if at := s.attempts[m.Task]; at != nil && at.attempt == m.Attempt {
				at.cancel()
				delete(s.attempts, m.Task)
			}
		}
	case attemptDone:
		if s := a.sessions[m.session]; s != nil {
			if at := s.attempts[m.task]; at != nil && at.attempt == m.attempt {
				delete(s.attempts, m.task)
			}
		}
	case workerTick:
		a.tick(ctx)
	case workerSessions:
		ctx.Respond(len(a.sessions))
	}
}

// hello opens session m.Session, or keeps it alive, and answers with a
// heartbeat; a hello the worker does not take is answered ServiceBusy.
func (a *nodeWorkerActor) hello(ctx actor.Context, m *messages.ServiceHello) {
	lease := time.Duration(m.LeaseMs) * time.Millisecond
	switch mine := int64(a.w.opts.MaxMessage); {
	case lease < actors.MinLease || lease > actors.MaxLease:
		a.busy(ctx, m.Session, 0, 0, true, fmt.Sprintf("a lease of %v: this worker takes leases from %v to %v (actors.Service.Lease, the spec's service.lease)", lease, actors.MinLease, actors.MaxLease))
		return
	case m.MaxMessage != 0 && m.MaxMessage != mine:
		a.busy(ctx, m.Session, 0, 0, true, fmt.Sprintf("this worker's --max-message is %d bytes, the trainer's %d: set the same on every node", mine, m.MaxMessage))
		return
	}
	s, why := a.session(ctx, m.Session)
	if s == nil {
		a.busy(ctx, m.Session, 0, 0, false, why)
		return
	}
	s.lease = lease
	ctx.Send(s.client, a.heartbeat(m.Session, s))
}

// busy answers a hello (task 0) or a task the worker does not take.
func (a *nodeWorkerActor) busy(ctx actor.Context, session string, task uint64, attempt uint32, refused bool, why string) {
	a.w.busy.Add(1)
	if ctx.Sender() != nil {
		ctx.Send(ctx.Sender(), &messages.ServiceBusy{Session: session, Task: task, Attempt: attempt, Refused: refused, Reason: why})
	}
}

// session is the session named id, opened for the message's sender when
// it is new and the limits allow it; nil, and why, when they do not.
func (a *nodeWorkerActor) session(ctx actor.Context, id string) (*wSession, string) {
	s := a.sessions[id]
	if s == nil {
		from := clientOf(ctx)
		lim := a.w.opts.Limits
		if len(a.sessions) >= lim.Sessions || a.perClient[from] >= lim.SessionsPerClient {
			return nil, fmt.Sprintf("busy: %d sessions open, %d of them this client's (at most %d, and %d a client)",
				len(a.sessions), a.perClient[from], lim.Sessions, lim.SessionsPerClient)
		}
		s = &wSession{client: ctx.Sender(), from: from, lease: actors.DefaultLease, attempts: map[uint64]*wAttempt{}}
		// Not watched: a watcher is told when its watchee stops, and a
		// client gone is then dialled in vain (see actors.Service's lose).
		// A session ends with its lease instead.
		a.sessions[id] = s
		a.perClient[from]++
	}
	s.heard = time.Now()
	return s, ""
}

// clientOf is the node address of the message's sender, which the limits
// count by; "" for a sender in the worker's own system or none.
func clientOf(ctx actor.Context) string {
	if p := ctx.Sender(); p != nil {
		return p.Address
	}
	return ""
}

func (a *nodeWorkerActor) heartbeat(id string, s *wSession) *messages.ServiceHeartbeat {
	hb := &messages.ServiceHeartbeat{Session: id}
	for t, at := range s.attempts {
		hb.Tasks, hb.Attempts, hb.Sent = append(hb.Tasks, t), append(hb.Attempts, at.attempt), append(hb.Sent, at.sent.Load())
	}
	s.beaten = time.Now()
	return hb
}

// drop ends session id: its attempts are cancelled.
func (a *nodeWorkerActor) drop(id string) {
	s := a.sessions[id]
	if s == nil {
		return
	}
	for _, at := range s.attempts {
		at.cancel()
	}
	delete(a.sessions, id)
	if a.perClient[s.from]--; a.perClient[s.from] <= 0 {
		delete(a.perClient, s.from)
	}
}

// tick sends the heartbeats that are due, and drops sessions whose client
// was not heard from for their lease.
func (a *nodeWorkerActor) tick(ctx actor.Context) {
	now := time.Now()
	for id, s := range a.sessions {
		if now.Sub(s.heard) > s.lease {
			a.drop(id)
			continue
		}
		if s.beat > 0 && now.Sub(s.beaten) >= s.beat {
			ctx.Send(s.client, a.heartbeat(id, s))
		}
	}
}

// start runs an attempt at a task, replacing an earlier attempt at it,
// unless the limits say the worker is busy.
func (a *nodeWorkerActor) start(ctx actor.Context, m *messages.ServiceTask) {
	s, why := a.session(ctx, m.Session)
	if s == nil {
		a.busy(ctx, m.Session, m.Task, m.Attempt, false, why)
		return
	}
	s.beat = time.Duration(m.BeatMs) * time.Millisecond
	old := s.attempts[m.Task]
	if old != nil && old.attempt >= m.Attempt {
		return
	}
	w := a.w
	if !w.admit(s.from) {
		a.busy(ctx, m.Session, m.Task, m.Attempt, false, w.busyTasks(s.from))
		return
	}
	if old != nil {
		old.cancel()
	}
	tctx, cancel := context.WithCancel(w.ctx)
	credit := min(uint64(m.Credit), uint64(w.opts.Limits.Credit))
	at := &wAttempt{attempt: m.Attempt, cancel: cancel, granted: uint64(m.Skip) + credit, wake: make(chan struct{})}
	at.sent.Store(m.Skip)
	s.attempts[m.Task] = at
	client, self := s.client, ctx.Self()
	from := s.from
	w.wg.Go(func() {
		end := w.run(tctx, client, m, at) // its pipeline closed
		cancelled := tctx.Err() != nil
		cancel()
		w.release(from) // before the end goes: the client's next task finds room
		if !cancelled {
			w.sys.Root.Send(client, end)
		}
		w.sys.Root.Send(self, attemptDone{session: m.Session, task: m.Task, attempt: m.Attempt})
	})
}

// admit counts an attempt of client from as running, if the limits let
// it run.
func (w *Worker) admit(from string) bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	lim := w.opts.Limits
	if w.runAll >= lim.Tasks || w.running[from] >= lim.TasksPerClient {
		return false
	}
	if w.running == nil {
		w.running = map[string]int{}
	}
	w.running[from]++
	w.runAll++
	return true
}

// release counts an attempt of client from as ended.
func (w *Worker) release(from string) {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	w.runAll--
	if w.running[from]--; w.running[from] <= 0 {
		delete(w.running, from)
	}
}

// busyTasks says why an attempt of client from was not started.
func (w *Worker) busyTasks(from string) string {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	lim := w.opts.Limits
	return fmt.Sprintf("busy: %d tasks running, %d of them this client's (at most %d, and %d a client)", w.runAll, w.running[from], lim.Tasks, lim.TasksPerClient)
}

// run makes the attempt's batches and sends them to client under credit;
// it returns the attempt's end.
func (w *Worker) run(ctx context.Context, client *actor.PID, m *messages.ServiceTask, at *wAttempt) *messages.ServiceTaskEnd {
	end := &messages.ServiceTaskEnd{Session: m.Session, Task: m.Task, Attempt: m.Attempt}
	n, st, err := w.produce(ctx, client, m, at)
	if err != nil && ctx.Err() != nil {
		return end // cancelled: the session ended, nothing is sent
	}
	if err != nil {
		w.failed.Add(1)
		var se *actors.StageError
		if errors.As(err, &se) {
			end.Failure = &messages.Failure{Stage: se.Stage, File: se.File, Offset: se.Offset, Class: se.Class, Cause: err.Error()}
		} else {
			end.Failure = &messages.Failure{Class: actors.Classify(err), Offset: -1, Cause: err.Error()}
		}
		return end
	}
	w.tasks.Add(1)
	end.Batches, end.Skipped, end.Corrupt = n, st.Skipped, corruptOf(st.Corrupt, m.GetJob())
	return end
}

// produce runs the task's pipeline, sending batches from index m.Skip on.
func (w *Worker) produce(ctx context.Context, client *actor.PID, m *messages.ServiceTask, at *wAttempt) (uint32, actors.Stats, error) {
	stages, opts, err := w.taskPipeline(m)
	if err != nil {
		return 0, actors.Stats{}, err
	}
	p, err := actors.NewContext(ctx, stages, opts)
	if err != nil {
		return 0, actors.Stats{}, err
	}
	defer p.Close()
	var index uint32
	for ; ; index++ {
		b, err := p.NextWire(ctx)
		if errors.Is(err, io.EOF) {
			return index, p.Stats(), nil
		}
		if err != nil {
			return 0, actors.Stats{}, err
		}
		if index < m.Skip {
			continue
		}
		if err := at.await(ctx, uint64(index)); err != nil {
			return 0, actors.Stats{}, err
		}
		sb := &messages.ServiceBatch{Session: m.Session, Task: m.Task, Attempt: m.Attempt, Index: index,
			Batch: &messages.Batch{Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids, Position: b.Position, Positions: b.Positions, Padding: b.Padding}}
		size := proto.Size(sb)
		if size > w.opts.MaxMessage {
			return 0, actors.Stats{}, fmt.Errorf("%w: batch %d of a task is %d bytes on the wire, above the worker's bound of %d (raise --max-message on every node)",
				actors.ErrBadSpec, index, size, w.opts.MaxMessage)
		}
		w.sys.Root.Send(client, sb)
		at.sent.Store(index + 1) // after the send: a heartbeat counting it leaves after it
		w.batches.Add(1)
		w.bytes.Add(int64(size))
	}
}

// corruptOf is the damaged chunks a task's pipeline skipped, each named
// by its file's index in the job, as the client numbers them.
func corruptOf(list []actors.CorruptChunk, job *messages.ServiceJob) []*messages.CorruptChunk {
	if len(list) == 0 {
		return nil
	}
	index := map[string]int{}
	for i, e := range job.GetFiles() {
		if _, path, err := readers.ParseEntry(e); err == nil {
			index[path] = i
		}
	}
	var out []*messages.CorruptChunk
	for _, c := range list {
		if i, ok := index[c.File]; ok {
			out = append(out, &messages.CorruptChunk{File: uint32(i), Offset: c.Offset, Records: int64(c.Records), Cause: c.Err.Error()})
		}
	}
	return out
}

// taskPipeline is the chain and options of a task's pipeline: the client's
// stages up to batch, resumed at the task's state.
func (w *Worker) taskPipeline(m *messages.ServiceTask) ([]actors.Stage, actors.Options, error) {
	job := m.GetJob()
	if job == nil || len(job.Files) == 0 || job.Batch == 0 {
		return nil, actors.Options{}, fmt.Errorf("%w: a task with no files or batch size", actors.ErrBadSpec)
	}
	var st actors.State
	if err := json.Unmarshal(m.State, &st); err != nil {
		return nil, actors.Options{}, fmt.Errorf("%w: a task's state: %w", actors.ErrState, err)
	}
	policy, err := supervisor.ParseCorruptPolicy(job.OnCorrupt)
	if err != nil {
		return nil, actors.Options{}, fmt.Errorf("%w: %w", actors.ErrBadSpec, err)
	}
	blend, err := jobBlend(job)
	if err != nil {
		return nil, actors.Options{}, err
	}
	stages := []actors.Stage{actors.Files{Paths: job.Files, Threads: w.opts.Threads, Blend: blend}}
	if job.Shuffled {
		stages = append(stages, actors.Shuffle{Window: int(job.Window), Seed: job.Seed, Global: job.Global})
	}
	rest, err := w.jobStages(job)
	if err != nil {
		return nil, actors.Options{}, err
	}
	stages = append(stages, rest...)
	open := func(ctx context.Context, entry string) (readers.Reader, error) {
		if _, path, err := readers.ParseEntry(entry); err == nil && objstore.IsURL(path) {
			if err := w.roots.object(path); err != nil {
				return nil, err
			}
		}
		if w.opts.Open == nil {
			return readers.Open(entry, readers.OpenOptions{Open: w.roots.open})
		}
		if err := w.roots.check(entry); err != nil {
			return nil, err
		}
		return w.opts.Open(ctx, entry)
	}
	rem, err := order.ParseRemainder(st.Remainder)
	if err != nil {
		return nil, actors.Options{}, fmt.Errorf("%w: a task's state: %w", actors.ErrState, err)
	}
	// The state's rank among its layout's: rank 0 of 1 for a task's own
	// positions, the client's for a tail of padding.
	shard := actors.Shard{Rank: st.Rank, World: st.Layout.World, Remainder: rem}
	return stages, actors.Options{System: w.local, Indexes: w.indexes, GroupSize: int(job.GroupSize), GroupBytes: int(job.GroupBytes), OnCorrupt: policy, Open: open, Resume: []actors.State{st},
		Shard: shard}, nil
}

// jobBlend is the blend a job names, nil for none: the worker's side of
// the client's Pipeline.serviceBlend. Phases or an epoch's positions with
// no weights are a malformed job; the weights themselves are checked by
// the worker's pipeline as it plans its order.
func jobBlend(job *messages.ServiceJob) (*order.Blend, error) {
	if len(job.GetBlendWeights()) == 0 {
		if len(job.GetBlendPhases()) > 0 || job.GetBlendSamples() > 0 {
			return nil, fmt.Errorf("%w: a task's blend has phases or samples but no weights", actors.ErrBadSpec)
		}
		return nil, nil
	}
	b := &order.Blend{Weights: job.GetBlendWeights(), Samples: job.GetBlendSamples()}
	for _, ph := range job.GetBlendPhases() {
		b.Phases = append(b.Phases, order.Phase{From: ph.GetFrom(), Weights: ph.GetWeights()})
	}
	return b, nil
}

// mapNamed is the function a task's map stage names: in Maps, or made by
// SampleMaps.
func (w *Worker) mapNamed(name string) (actors.MapFunc, actors.SampleMapFunc, error) {
	if fn := w.opts.Maps[name]; fn != nil {
		return fn, nil, nil
	}
	if w.opts.SampleMaps != nil {
		samples, err := w.opts.SampleMaps(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: map %q: %w", actors.ErrBadSpec, name, err)
		}
		return nil, samples, nil
	}
	return nil, nil, fmt.Errorf("%w: this worker has no map named %q (WorkerOptions.Maps)", actors.ErrBadSpec, name)
}

// jobStages are the stages of a job after its shuffle: its batch stage and
// its maps, found by name.
func (w *Worker) jobStages(job *messages.ServiceJob) ([]actors.Stage, error) {
	var out []actors.Stage
	for _, st := range job.Stages {
		switch st.Kind {
		case actors.KindBatch:
			out = append(out, actors.Batch{Size: int(job.Batch), DropLast: job.DropLast})
			continue
		case actors.KindMap, actors.KindXMap:
		default:
			return nil, fmt.Errorf("%w: a task's stage of kind %q", actors.ErrBadSpec, st.Kind)
		}
		fn, samples, err := w.mapNamed(st.Name)
		if err != nil {
			return nil, err
		}
		if st.Kind == actors.KindMap {
			out = append(out, actors.Map{Fn: fn, Samples: samples, Name: st.Name})
		} else {
			out = append(out, actors.XMap{Fn: fn, Samples: samples, Name: st.Name, Workers: int(st.Workers)})
		}
	}
	if len(out) == 0 { // a job of a client that names no stages: batch only
		out = append(out, actors.Batch{Size: int(job.Batch), DropLast: job.DropLast})
	}
	return out, nil
}
