package actors

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/order"
)

// WorkerName is the name of a worker's actor on its node: a Service
// pipeline sends its tasks to WorkerName at every worker's address.
const WorkerName = "actorfeed-worker"

// DefaultMaxMessage bounds a batch on the wire unless a worker's options
// (service.WorkerOptions) say otherwise: a batch of 64 samples of
// 224x224x3 bytes is 9.6 MB.
const DefaultMaxMessage = 64 << 20

// The leases a worker takes (Service.Lease): a shorter one would have it
// drop live sessions between two ticks of its own, a longer one keep a
// dead client's tasks for hours.
const (
	MinLease = 100 * time.Millisecond
	MaxLease = time.Hour
)

// Service runs the stages of a pipeline before its double buffer (file
// readers, open_files, the order's shuffle and the batch stage) on worker
// nodes, `actorfeed serve` or a Worker, that read the same files: a shared
// file system, or the same paths on every node (docs/distributed.md). The
// pipeline hands them tasks, runs of its shard's positions, as they ask
// for work, takes their batches back under credit and hands them on in
// the order: its devices see the batches a pipeline without Service would
// make, and its State resumes either. Options.System must be a node's
// system (service.Listen), so that workers can answer; a Worker in
// the pipeline's own system (Workers: its Address) needs none.
type Service struct {
	// Workers are the workers' addresses, host:port.
	Workers []string
	// Credit is how many batches of a task a worker may have sent that the
	// pipeline did not hand on yet. Default DefaultServiceCredit.
	Credit int
	// Tasks is how many unfinished tasks a worker holds at once: the next
	// one starts while the last is handed on. Default 2.
	Tasks int
	// Lease is how long a worker may go unheard (it tells it is alive every
	// Lease/4) before it is taken for lost and its tasks go to the others.
	// Default DefaultLease.
	Lease time.Duration
	// WaitForWorkers is how long the pipeline waits, with tasks left and no
	// worker alive, for one to come back before it fails with
	// ErrNoWorkers. Default DefaultWaitForWorkers.
	WaitForWorkers time.Duration
	// MaxMessage is the largest message the node of Options.System
	// receives (service.Config.MaxMessage): a worker that may send
	// larger batches, or whose bound differs, refuses the session, and the
	// pipeline fails with both bounds named. Default DefaultMaxMessage.
	MaxMessage int
}

// Defaults of Service.
const (
	DefaultServiceCredit  = 8
	DefaultLease          = 10 * time.Second
	DefaultWaitForWorkers = time.Minute
)

// ErrNoWorkers is wrapped when a Service pipeline had no worker alive for
// Service.WaitForWorkers with tasks left.
var ErrNoWorkers = protocol.ErrNoWorkers

// KindService is the stage that hands tasks to the service's workers and
// takes their batches back (Options.Service).
const KindService = "service"

func (s Service) withDefaults() Service {
	if s.Credit <= 0 {
		s.Credit = DefaultServiceCredit
	}
	if s.Tasks <= 0 {
		s.Tasks = 2
	}
	if s.Lease <= 0 {
		s.Lease = DefaultLease
	}
	if s.WaitForWorkers <= 0 {
		s.WaitForWorkers = DefaultWaitForWorkers
	}
	if s.MaxMessage <= 0 {
		s.MaxMessage = DefaultMaxMessage
	}
	return s
}

// MaxWaitForWorkers bounds Service.WaitForWorkers.
const MaxWaitForWorkers = 24 * time.Hour

// checkDurations refuses a lease a worker would refuse, and a wait beyond
// any job's: 1ns made a worker drop and reopen sessions without end.
func (s Service) checkDurations() error {
	if s.Lease != 0 && (s.Lease < MinLease || s.Lease > MaxLease) {
		return fmt.Errorf("%w: Service.Lease %v: want %v to %v", ErrBadSpec, s.Lease, MinLease, MaxLease)
	}
	if s.WaitForWorkers < 0 || s.WaitForWorkers > MaxWaitForWorkers {
		return fmt.Errorf("%w: Service.WaitForWorkers %v: want up to %v", ErrBadSpec, s.WaitForWorkers, MaxWaitForWorkers)
	}
	return nil
}

// checkService refuses a service a chain cannot have: it needs the order
// (Files, not AnyOrder), its workers run a shuffle right after the files and
// one batch stage, and nothing else comes before the double buffer.
func checkService(stages []Stage, opts Options, dev *Devices) error {
	s := opts.Service
	if s == nil {
		return nil
	}
	switch {
	case len(s.Workers) == 0:
		return fmt.Errorf("%w: a service with no workers", ErrBadSpec)
	case opts.Lanes > 1:
		return fmt.Errorf("%w: a service's workers are its lanes: Lanes must be 1", ErrBadSpec)
	case dev != nil && dev.Storage != nil:
		return fmt.Errorf("%w: a service's batches arrive in memory the network layer allocates: Devices.Storage is not supported", ErrBadSpec)
	case opts.Shard.GlobalBatch > 0 && opts.Shard.Remainder == order.Pad:
		return fmt.Errorf("%w: a service deals a padded global batch's last step to no worker: with a service, a global batch drops its last partial step (Remainder order.Drop)", ErrBadSpec)
	case opts.System == nil:
		return fmt.Errorf("%w: a service needs Options.System: a node's system (service.Listen), so that workers can answer", ErrBadSpec)
	}
	if own := opts.System.Address(); own == "nonhost" { // protoactor's address without remote
		for _, w := range s.Workers {
			if w != own {
				return fmt.Errorf("%w: worker %s: a service needs Options.System to be a node's system (service.Listen), so that workers can answer", ErrBadSpec, w)
			}
		}
	}
	if err := errors.Join(checkSize("Service", "Credit", s.Credit, 0, MaxQueue), checkSize("Service", "Tasks", s.Tasks, 0, MaxQueue),
		checkSize("Service", "MaxMessage", s.MaxMessage, 0, math.MaxInt32), s.checkDurations()); err != nil {
		return err
	}
	if f, ok := stages[0].(Files); !ok || f.AnyOrder || len(f.Slots) > 0 {
		return fmt.Errorf("%w: a service needs a Files source in the order (not AnyOrder, no Slots)", ErrBadSpec)
	}
	batches := 0
	for i, st := range stages[1:] {
		switch st := st.(type) {
		case Batch:
			batches++
		case DoubleBuffer:
		case Map, XMap:
			if mapName(st) == "" {
				return fmt.Errorf("%w: stage %d (%s): a service's workers run a map by its name (WorkerOptions.Maps): give it one", ErrBadSpec, i+1, st.kind())
			}
		case Shuffle:
			if i == 0 {
				continue
			}
			return fmt.Errorf("%w: stage %d (%s): a service takes a shuffle only right after the files", ErrBadSpec, i+1, st.kind())
		default:
			return fmt.Errorf("%w: stage %d (%s): a service's workers run files, shuffle, batch and named maps only", ErrBadSpec, i+1, st.kind())
		}
	}
	if batches != 1 {
		return fmt.Errorf("%w: a service's workers need one batch stage, the chain has %d", ErrBadSpec, batches)
	}
	return nil
}

// The states of a ServiceWorker.
const (
	ServiceWorkerAlive  = protocol.WorkerAlive
	ServiceWorkerLost   = protocol.WorkerLost
	ServiceWorkerClosed = protocol.WorkerClosed
)

// ServiceWorker is what a Service pipeline knows of one of its workers.
type ServiceWorker struct {
	Addr string
	// State is ServiceWorkerAlive, ServiceWorkerLost (taken for lost, or
	// never reached, and not back), or ServiceWorkerClosed (alive when the
	// pipeline ended its session).
	State string
	// Batches and Bytes (on the wire) taken in from it, Tasks it
	// completed, all passes.
	Batches, Bytes, Tasks int64
	// Lost counts the times it was taken for lost; Why says why, last.
	Lost int64
	Why  string
	// Reassigned counts its tasks taken back and handed out again: lost
	// with it, batches of theirs lost on the way, or a restart of the
	// service stage.
	Reassigned int64
	// Credit is how many batches it may send now: granted to its running
	// attempts and not yet taken in.
	Credit int64
}

// ServiceWorkers is what the pipeline knows of its service's workers, nil
// without Options.Service.
func (p *Pipeline) ServiceWorkers() []ServiceWorker {
	if p.service == nil {
		return nil
	}
	c := p.service
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil {
		for _, w := range c.m.Workers {
			c.snap = append(c.snap, ServiceWorker{Addr: w.Addr})
		}
	}
	return slices.Clone(c.snap)
}

// serviceJob is what the workers are told of the chain.
func (p *Pipeline) serviceJob(stages []Stage) (*messages.ServiceJob, error) {
	opts := p.pipe.opts
	job := &messages.ServiceJob{GroupSize: uint32(opts.GroupSize), GroupBytes: uint32(opts.GroupBytes), OnCorrupt: opts.OnCorrupt.String()}
	for _, e := range stages[0].(Files).Paths {
		name, path, err := readers.ParseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
		if !objstore.IsURL(path) { // an object's URL is the worker's to read, with its credentials
			if path, err = filepath.Abs(path); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadSpec, e, err)
			}
		}
		if name != "" {
			path = name + ":" + path
		}
		job.Files = append(job.Files, path)
	}
	if sh, ok := stageAt[Shuffle](stages, 1); ok {
		job.Seed, job.Window, job.Shuffled, job.Global = sh.Seed, uint32(sh.Window), true, sh.Global
	}
	p.serviceBlend(job)
	for _, s := range stages[1:] {
		switch s := s.(type) {
		case Batch:
			job.Batch, job.DropLast = uint32(s.Size), s.DropLast
			job.Stages = append(job.Stages, &messages.ServiceStage{Kind: KindBatch})
		case Map:
			job.Stages = append(job.Stages, &messages.ServiceStage{Kind: KindMap, Name: s.Name})
		case XMap:
			job.Stages = append(job.Stages, &messages.ServiceStage{Kind: KindXMap, Name: s.Name, Workers: uint32(s.Workers)})
		}
	}
	return job, nil
}

// serviceBlend tells the workers the order's blend as the plan resolved
// it, its phases at positions of the run rather than at global steps: a
// worker's pipeline is rank 0 of its task's layout and knows no global
// batch.
func (p *Pipeline) serviceBlend(job *messages.ServiceJob) {
	if p.order == nil || p.order.blend == nil { // an order of any kind, or no blend
		return
	}
	b := p.order.blend
	job.BlendWeights, job.BlendSamples = b.Weights, b.Samples
	for _, ph := range b.Phases {
		job.BlendPhases = append(job.BlendPhases, &messages.ServiceBlendPhase{From: ph.From, Weights: ph.Weights})
	}
}

// mapName is a Map's or XMap's Name.
func mapName(s Stage) string {
	switch s := s.(type) {
	case Map:
		return s.Name
	case XMap:
		return s.Name
	}
	return ""
}

// planService plans the service stage in place of the chain's first n
// stages.
func (p *Pipeline) planService(stages []Stage, n int) (spawnable, error) {
	job, err := p.serviceJob(stages)
	if err != nil {
		return spawnable{}, err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return spawnable{}, fmt.Errorf("actors: naming the service's sessions: %w", err)
	}
	name := fmt.Sprintf("%d-%s", n-1, KindService)
	cfg := p.pipe.opts.Service.withDefaults()
	sc := &serviceCell{cell: cell{name: name, kind: KindService, pipe: p.pipe}, plan: p.order, files: p.files}
	sc.m = protocol.ServiceMachine{Name: name, Credit: cfg.Credit, Tasks: cfg.Tasks, Lease: cfg.Lease, WaitForWorkers: cfg.WaitForWorkers,
		MaxMessage: cfg.MaxMessage, Capacity: p.pipe.opts.Capacity, Session: hex.EncodeToString(id), Self: p.pipe.opts.System.Address(),
		Job: job, Plan: &p.order.Plan, TasksOf: sc.tasksOf, Now: time.Now, Effects: protocol.ServiceEffects{
			Arrived:  func(b *messages.Batch) { sc.pipe.noteProduced(KindBatch, b) }, // the workers' batch stage made it
			HandedOn: func(*messages.Batch) { sc.meter.items.Add(1) },
			Dropped:  sc.pipe.discard,
			Corrupt:  sc.noteCorrupt,
		}}
	for _, addr := range cfg.Workers {
		sc.m.Workers = append(sc.m.Workers, &protocol.Worker{Addr: addr, PID: actor.NewPID(addr, WorkerName)})
	}
	p.cells = append(p.cells, &sc.cell)
	p.service = sc
	p.pipe.counting = true // its batches count as alive from their arrival
	return spawnable{name: name, cell: &sc.cell,
		producer: func(*actor.PID, []*actor.PID) actor.Actor { return &serviceActor{c: sc} }}, nil
}

// serviceCell is what the service stage persists across restarts: its
// machine (the workers, the pass's tasks and what was taken in of each,
// the link to the double buffer) and what cuts a pass into tasks.
type serviceCell struct {
	cell
	m      protocol.ServiceMachine
	plan   *orderPlan
	files  *fileSource // names the job's files in what the workers report
	nextID uint64      // the next task's id, all passes
	probes sync.WaitGroup

	mu   sync.Mutex
	snap []ServiceWorker // what Pipeline.ServiceWorkers shows
}

// taskSpan is the positions of a data service task, for windows of window
// positions (the order's span: order.Block unshuffled), items of unit
// positions and splits of about split records. It is a whole number of
// items and, where that is not far larger, of windows, so that no window
// is read by two workers: a window is read whole to be permuted, whichever
// of its positions a task delivers (when window and unit do not align,
// about four windows keep what a window cut by a task costs to a
// quarter). And it is at least eight splits, about 8 MiB of RecordIO
// chunks whatever the samples' size: a split that a task ends inside is
// read, checksummed and decoded by two workers.
func taskSpan(window, unit, split uint64) uint64 {
	window, unit = max(window, 1), max(unit, 1)
	base := lcm(window, unit)
	if base > 4*max(window, unit) {
		base = (4*window + unit - 1) / unit * unit
	}
	return base * max(1, (8*split+base-1)/base)
}

func lcm(a, b uint64) uint64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// tasksOf cuts pass's share of the rank into tasks of taskSpan positions:
// whole batches and windows, at least eight splits. A task is described by
// a State whose layout holds its positions for rank 0 of 1. Padding
// (order.Pad) repeats positions, which no such layout can hold: the task
// it starts in and the rest of the share are one tail task, the rank's own
// state from that task's start on.
func (c *serviceCell) tasksOf(pass uint32) ([]*protocol.Task, error) {
	layout, done := c.plan.Layout(pass)
	segs := layout.Cut(c.plan.Rank, c.plan.Remainder, done)
	var tasks []*protocol.Task
	var cur *protocol.Task
	var ranges []order.Range
	base := c.plan.state(0, 0, nil, false) // the order's fields; the rest is each task's
	flush := func() error {
		if cur == nil {
			return nil
		}
		st := base
		st.Epoch, st.Layout, st.Rank, st.Done, st.Beyond = c.plan.Epoch(pass), order.Layout{World: 1, Ranges: ranges}, 0, 0, nil
		st.Remainder = order.Drop.String()
		if cur.Tail {
			st.Layout, st.Rank, st.Done, st.Remainder = layout, c.plan.Rank, cur.Lo, c.plan.Remainder.String()
		}
		var err error
		if cur.State, err = json.Marshal(st); err != nil {
			return fmt.Errorf("actors: a task's state: %w", err)
		}
		tasks, cur, ranges = append(tasks, cur), nil, nil
		return nil
	}
	for _, s := range segs {
		lo, at := s.Lo, s.At
		for lo < s.Hi {
			end := (at-done)/c.plan.span*c.plan.span + c.plan.span + done // where at's task ends
			hi := min(s.Hi, lo+(end-at))
			if cur == nil {
				cur = protocol.NewTask(c.nextID, at)
				c.nextID++
			}
			if s.Pad {
				cur.Tail = true
				return tasks, flush()
			}
			ranges = append(ranges, order.Range{Lo: lo, Hi: hi})
			at += hi - lo
			lo = hi
			if at == end {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	return tasks, flush()
}
