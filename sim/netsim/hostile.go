package netsim

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/service"
)

// A hostile trainer's storm, on each worker: hellos with a lease no worker
// takes, then sessions opened as a trainer that reconnects without end
// would, and on every session it got, tasks that grant credit without
// end and never take in a batch nor say hello again.
const (
	hostileBadLeases = 20
	hostileSessions  = 3 * 16 // three times a worker's sessions a client
	hostileTasks     = 4      // a session
	hostileCredit    = 1 << 31
)

// hostileTrainer is a node that talks the service protocol (docs/
// distributed.md) to a scenario's workers as no actors.Service does.
type hostileTrainer struct {
	node   *service.Node
	pid    *actor.PID
	addrOf map[string]string // session -> the worker it was asked of
	mu     sync.Mutex
	got    hostileCounts
	open   map[string]bool // the sessions a heartbeat answered
	seen   chan struct{}   // a token an answer
}

// hostileCounts are the answers a hostile trainer got from the workers.
type hostileCounts struct {
	Sessions, Busy, Refused, Batches, Ends int
}

// hostileActor counts what the workers answer.
type hostileActor struct{ h *hostileTrainer }

func (a hostileActor) Receive(ctx actor.Context) {
	h := a.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *messages.ServiceHeartbeat:
		if h.open[m.Session] {
			return // a session's later heartbeat
		}
		h.open[m.Session] = true
		h.got.Sessions++
	case *messages.ServiceBusy:
		if m.Refused {
			h.got.Refused++
		} else {
			h.got.Busy++
		}
		if m.Attempt == 0 {
			break
		}
		return // a task's answer: not awaited
	case *messages.ServiceBatch:
		h.got.Batches++
		return
	case *messages.ServiceTaskEnd:
		h.got.Ends++
		return
	default:
		return
	}
	select {
	case h.seen <- struct{}{}:
	default:
	}
}

func startHostileTrainer() (*hostileTrainer, error) {
	n, err := retryPort(func(addr string) (*service.Node, error) {
		return service.Listen(service.Config{Listen: addr, Keepalive: time.Second})
	})
	if err != nil {
		return nil, err
	}
	h := &hostileTrainer{node: n, addrOf: map[string]string{}, open: map[string]bool{}, seen: make(chan struct{}, 1)}
	h.pid = n.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return hostileActor{h} }))
	return h, nil
}

// storm misbehaves towards every worker at addrs, for a job over paths,
// and returns what the workers answered. It waits for the answers to its
// hellos only: the tasks' answers come as they come.
func (h *hostileTrainer) storm(ctx context.Context, addrs, paths []string) (hostileCounts, error) {
	root := h.node.System().Root
	hellos := 0
	for _, addr := range addrs {
		w := actor.NewPID(addr, actors.WorkerName)
		for k := range hostileBadLeases {
			root.RequestWithCustomSender(w, &messages.ServiceHello{Session: fmt.Sprintf("bad-lease-%d", k), LeaseMs: 1}, h.pid)
		}
		for k := range hostileSessions {
			s := fmt.Sprintf("storm-%s-%d", addr, k)
			h.addrOf[s] = addr
			root.RequestWithCustomSender(w, &messages.ServiceHello{Session: s, LeaseMs: 10_000}, h.pid)
		}
		hellos += hostileBadLeases + hostileSessions
	}
	if err := h.await(ctx, hellos); err != nil {
		return hostileCounts{}, err
	}
	job, state, err := hostileJob(paths)
	if err != nil {
		return hostileCounts{}, err
	}
	h.mu.Lock()
	var sessions []string
	for s := range h.open {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		w := actor.NewPID(h.addrOf[s], actors.WorkerName)
		for task := range uint64(hostileTasks) {
			root.RequestWithCustomSender(w, &messages.ServiceTask{Session: s, Task: task, Attempt: 1, Job: job, State: state, Credit: hostileCredit, BeatMs: 1}, h.pid)
			root.RequestWithCustomSender(w, &messages.ServiceCredit{Session: s, Task: task, Attempt: 1, Granted: 1 << 40}, h.pid)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got, nil
}

// await waits for n answers to hellos.
func (h *hostileTrainer) await(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		got := h.got.Sessions + h.got.Busy + h.got.Refused
		h.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-h.seen:
		case <-ctx.Done():
			return fmt.Errorf("the workers answered %d of the hostile trainer's %d hellos: %w", got, n, context.Cause(ctx))
		}
	}
}

// counts is what the workers answered so far.
func (h *hostileTrainer) counts() hostileCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

// hostileJob is a job over the files at paths that a worker takes: the
// whole epoch of one rank, from a fresh state.
func hostileJob(paths []string) (*messages.ServiceJob, []byte, error) {
	job := &messages.ServiceJob{Batch: 4, OnCorrupt: "fail", Stages: []*messages.ServiceStage{{Kind: actors.KindBatch}}}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, nil, err
		}
		job.Files = append(job.Files, abs)
	}
	state, err := json.Marshal(actors.FreshState(actors.Shard{World: 1}))
	return job, state, err
}

// check says where the workers gave the hostile trainer more than their
// limits allow: sessions, a refusal for every bad lease, and batches (a
// task's first credit and one grant, of the tasks a client may run).
func (c hostileCounts) check(workers int) []string {
	lim := service.DefaultWorkerLimits
	var bad []string
	if c.Sessions > workers*lim.SessionsPerClient {
		bad = append(bad, fmt.Sprintf("the hostile trainer got %d sessions on %d workers, above %d a worker", c.Sessions, workers, lim.SessionsPerClient))
	}
	if c.Refused != workers*hostileBadLeases {
		bad = append(bad, fmt.Sprintf("%d of the hostile trainer's %d hellos with a lease of 1ms were refused", c.Refused, workers*hostileBadLeases))
	}
	if most := workers * lim.TasksPerClient * 2 * lim.Credit; c.Batches > most {
		bad = append(bad, fmt.Sprintf("the hostile trainer got %d batches, above the %d its tasks' credit allows", c.Batches, most))
	}
	return bad
}

func (h *hostileTrainer) close() error { return h.node.Close() }

// Hostile is the network scenario of seed without faults, beside a
// hostile trainer.
func Hostile(seed uint64) Scenario {
	sc := Generate(seed)
	sc.Faults, sc.Slow, sc.Hostile = nil, Slowdown{Worker: -1}, true
	return sc
}

// hostileRun is a hostile trainer storming a scenario's workers aside.
type hostileRun struct {
	h    *hostileTrainer
	done sync.WaitGroup
	err  error
}

// startHostile starts the scenario's hostile trainer, if it has one, and
// its storm aside; nil without one.
func startHostile(ctx context.Context, sc Scenario, c *cluster, paths []string) (*hostileRun, error) {
	if !sc.Hostile {
		return nil, nil
	}
	h, err := startHostileTrainer()
	if err != nil {
		return nil, fmt.Errorf("the hostile trainer: %w", err)
	}
	r := &hostileRun{h: h}
	r.done.Go(func() { _, r.err = h.storm(ctx, c.addrs, paths) })
	return r, nil
}

// stop waits for the storm, closes the hostile trainer and says where the
// workers gave it more than their limits.
func (r *hostileRun) stop(workers int) []string {
	if r == nil {
		return nil
	}
	r.done.Wait()
	bad := r.h.counts().check(workers)
	if r.err != nil {
		bad = append(bad, r.err.Error())
	}
	if err := r.h.close(); err != nil {
		bad = append(bad, fmt.Sprintf("the hostile trainer's node: %v", err))
	}
	return bad
}
