package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/supervisor"
)

// Pipeline is the handle on a running chain of stage actors (PaddlePaddle Fluid's
// ReaderHolder): it hides every stage's type. A pipeline built by New is
// read with Next (safe from several goroutines at once) and HasNext; one
// built by NewDevices feeds device actors and is driven with Run. Reset
// starts the next pass clean; Shutdown and Close end it.
type Pipeline struct {
	sys     *actor.ActorSystem
	own     bool
	pipe    *shared
	top     *actor.PID
	pool    *pool // the dispatcher of the pipeline's actors
	sinks   []*consumerCell
	devices []*deviceCounter
	cells   []*cell
	queues  []*readers.FeedQueue // closed at shutdown, releasing producers
	opened  []uint64             // each queue's Opened when the pass started
	files   *fileSource          // a Files source's files
	gather  *gatherSource        // their records by position, in a global order
	// windowed is why a global Shuffle fell back to its window
	// (Shuffle.OrWindow); nil when it did not.
	windowed error
	order    *orderPlan   // nil when the source is not Files in an order
	service  *serviceCell // the service stage (Options.Service)
	// unplaced names the stage that does not keep items' places in the
	// order, when one does not: the pipeline then has no State.
	unplaced string
	// aligned is the index of the batch stage that makes one batch of each
	// item of the order, 0 when none does (stage 0 is the source).
	aligned  int
	dropLast bool // that stage's DropLast

	mu          sync.Mutex
	pass        uint32
	inflight    int
	closed      bool
	ran         bool   // Run returned nil for ranPass
	ranPass     uint32 // the last pass Run saw to its end
	drained     bool   // Next returned io.EOF in drainedPass
	drainedPass uint32
}

// New builds and starts a pipeline read with Next. stages[0] is a source;
// the rest decorate it in order. It is NewContext with a context that
// never ends.
func New(stages []Stage, opts Options) (*Pipeline, error) {
	return build(context.Background(), stages, nil, opts)
}

// NewDevices builds and starts a pipeline that feeds dev.N device actors.
// With more than one device and no DoubleBuffer stage, a DoubleBuffer with
// the default window is added. It is NewDevicesContext with a context that
// never ends.
func NewDevices(stages []Stage, dev Devices, opts Options) (*Pipeline, error) {
	return build(context.Background(), stages, &dev, opts)
}

// NewContext is New whose building stops when ctx ends. In the order,
// building reads every file's chunk index (or counts the records of a
// file without one) on Options.Retry's schedule, which on slow or failing
// storage takes as long as that; a build stopped so returns an error
// wrapping ctx's.
func NewContext(ctx context.Context, stages []Stage, opts Options) (*Pipeline, error) {
	return build(ctx, stages, nil, opts)
}

// NewDevicesContext is NewDevices whose building stops when ctx ends (see
// NewContext).
func NewDevicesContext(ctx context.Context, stages []Stage, dev Devices, opts Options) (*Pipeline, error) {
	return build(ctx, stages, &dev, opts)
}

// NewSystem returns an actor system set up as pipelines need it: no log
// output, dead letters reported at once (so no logging goroutine outlives
// a test), and a small process registry: protoactor's is 1,024 maps of
// 32 shards each, which the collector marks on every cycle for as long as
// the system lives (what that cost: docs/performance.md). A pipeline has a
// few dozen actors; registryBuckets maps (256 shards) still keep lookups
// free of contention.
func NewSystem() *actor.ActorSystem {
	sys := actor.NewActorSystem(
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	// Nothing runs in the system yet; its own processes (deadletter,
	// eventstream) move to the small registry.
	old := sys.ProcessRegistry.LocalPIDs
	small := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range small.LocalPIDs {
		small.LocalPIDs[i] = cmap.New()
	}
	for _, bucket := range old.LocalPIDs {
		bucket.IterCb(func(id string, p any) { small.GetBucket(id).Set(id, p) })
	}
	sys.ProcessRegistry.LocalPIDs = small
	return sys
}

// registryBuckets is how many maps NewSystem's process registry has.
const registryBuckets = 8

// built asks the pipeline's supervisor actor whether it spawned its stages.
type built struct{}

// build checks the chain and options, plans the stages and spawns them
// under the pipeline's supervisor actor.
func build(ctx context.Context, stages []Stage, dev *Devices, opts Options) (*Pipeline, error) {
	if err := errors.Join(validate(stages, dev), opts.validate()); err != nil {
		return nil, err
	}
	opts.EnsureDefaults()
	if err := errors.Join(checkLanes(stages, opts.Lanes), checkService(stages, opts, dev)); err != nil {
		return nil, err
	}
	// Several devices are fed by a double buffer, and so are several lanes
	// merged, and a service's workers.
	if dev != nil && dev.N > 1 || opts.Lanes > 1 || opts.Service != nil {
		if _, ok := stages[len(stages)-1].(DoubleBuffer); !ok {
			stages = append(slices.Clone(stages), DoubleBuffer{})
		}
	}
	if opts.Lanes > 1 && laneFirst(stages) >= laneStages(stages) {
		opts.Lanes = 1 // no stage after the order's assembly to copy
	}
	p := &Pipeline{sys: opts.System, own: opts.System == nil, pool: newPool()}
	if p.own {
		p.sys = NewSystem()
	}
	p.pipe = newShared(opts, p.sys.Root)
	plan, err := p.plan(ctx, stages, dev)
	if err != nil {
		p.finish() // nothing was spawned; an own system is shut down
		return nil, err
	}
	sup := &supervisorActor{p: p, plan: plan, strategy: &supervisor.Strategy{Tracker: supervisor.NewTracker(opts.Intensity)}}
	props := actor.PropsFromProducer(func() actor.Actor { return sup }, actor.WithSupervisor(sup.strategy),
		actor.WithDispatcher(p.pool))
	p.top = p.sys.Root.Spawn(props)
	if _, err := p.sys.Root.RequestFuture(p.top, built{}, 10*time.Second).Result(); err != nil {
		p.Close()
		return nil, fmt.Errorf("actors: starting the pipeline: %w", err)
	}
	return p, nil
}

// Next returns the next item of the pass, or io.EOF at its end, as the
// readers do. It is safe to call from several goroutines at once; each item
// goes to exactly one caller. After a stage failed, Next returns that
// stage's *StageError; after Shutdown or Close, ErrShutdown.
func (p *Pipeline) Next(ctx context.Context) (Item, error) {
	if err := p.enter(); err != nil {
		return Item{}, err
	}
	defer p.leave()
	b, err := p.take(ctx)
	if err != nil {
		return Item{}, err
	}
	return p.sinks[0].toItem(b)
}

// NextWire is Next for a data service worker (package service): the next
// batch as it travels between nodes, its tensors left encoded; io.EOF at
// the end of the pass.
func (p *Pipeline) NextWire(ctx context.Context) (*messages.Batch, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.take(ctx)
}

// take is the first sink's next batch; io.EOF at the end of the pass.
func (p *Pipeline) take(ctx context.Context) (*messages.Batch, error) {
	b, err := p.sinks[0].take(ctx)
	if err != nil {
		return nil, p.shutdownErr(err)
	}
	if b == nil {
		p.mu.Lock()
		p.drained, p.drainedPass = true, p.sinks[0].passOf()
		p.mu.Unlock()
		return nil, io.EOF
	}
	return b, nil
}

// Recycle gives the storage of an item Next returned back to the batch
// stage, which makes a later batch in it instead of allocating one: a
// reader that copies each item out (into shared memory, onto a device)
// saves an allocation, and its garbage, per batch. Call it once an item,
// when neither its tensors nor any view of them are used again. Items of a
// pipeline with stages after its Batch stage (other than a DoubleBuffer)
// are left to the garbage collector. It is safe to call from any
// goroutine.
func (p *Pipeline) Recycle(it Item) { p.pipe.recycle(it.Slots) }

// HasNext reports whether Next has another item in this pass, waiting until
// that is known.
func (p *Pipeline) HasNext(ctx context.Context) (bool, error) {
	if err := p.enter(); err != nil {
		return false, err
	}
	defer p.leave()
	ok, err := p.sinks[0].peek(ctx)
	return ok, p.shutdownErr(err)
}

func (p *Pipeline) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrShutdown
	}
	if p.devices != nil {
		return fmt.Errorf("%w: this pipeline feeds devices; use Run", ErrProtocol)
	}
	p.inflight++
	return nil
}

func (p *Pipeline) leave() {
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
}

// shutdownErr reports reads cut short by Shutdown or Close as ErrShutdown.
func (p *Pipeline) shutdownErr(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil && p.closed {
		return ErrShutdown
	}
	return err
}

// Reset starts the next pass clean (PaddlePaddle Fluid's ReInit): every stage drops
// what it holds of the current pass and the sources start over. It is a
// mailbox protocol: the consumers subscribe for the new pass and each stage
// passes the subscription upstream. Reset while Next, HasNext or Run is in
// flight returns ErrReadsInFlight: it would end the pass they are reading
// early, with no error.
func (p *Pipeline) Reset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrShutdown
	}
	if err := p.pipe.terminal(); err != nil {
		return err
	}
	if p.inflight > 0 {
		return ErrReadsInFlight
	}
	p.pass++
	// A feed queue's pass ended when its producer closed it: it is opened
	// for the next pass's producer, as Fluid's py_reader reset does, unless
	// the producer re-opened it already (then a close is its new pass's).
	for i, q := range p.queues {
		p.opened[i] = q.ReOpenClosed(p.opened[i])
	}
	// What the old pass left in flight is gone; what the double buffer read
	// ahead is the new pass's.
	p.pipe.live.Store(p.pipe.ahead.Load())
	for _, s := range p.sinks {
		// The consumer forgets the old pass before Reset returns; its actor
		// then subscribes for the new one.
		s.beginPass(p.pass)
		p.sys.Root.Send(s.self, restartPass{pass: p.pass})
	}
	return nil
}

// Pass is the number of the current pass, from 0, counted by Reset.
func (p *Pipeline) Pass() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.pass)
}

// Run waits until every device has consumed the current pass, and returns
// the first error of any stage or device. Call Reset to run another pass:
// Run on a pass that already ran to its end returns ErrPassDone (it would
// deliver nothing).
func (p *Pipeline) Run(ctx context.Context) (err error) {
	if p.devices == nil {
		return fmt.Errorf("%w: this pipeline has no devices; use Next", ErrProtocol)
	}
	p.mu.Lock()
	if p.ran && p.ranPass == p.pass {
		p.mu.Unlock()
		return fmt.Errorf("%w: pass %d", ErrPassDone, p.pass)
	}
	p.inflight++
	pass := p.pass
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if err == nil && !p.Stopped() {
			p.ran, p.ranPass = true, pass
		}
		p.mu.Unlock()
		p.leave()
	}()
	for {
		p.mu.Lock()
		pass, closed := p.pass, p.closed
		p.mu.Unlock()
		if closed {
			return ErrShutdown
		}
		if err := p.pipe.terminal(); err != nil {
			return err
		}
		p.pipe.mu.Lock()
		ch, done := p.pipe.ended, 0
		for _, s := range p.sinks {
			if e, ok := p.pipe.ends[s.name]; ok && e == pass {
				done++
			}
		}
		p.pipe.mu.Unlock()
		if done == len(p.sinks) && p.devicesIdle() || p.Stopped() {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		case <-p.pipe.done:
		case <-p.pipe.budget.spentCh():
		}
	}
}

// Stopped says whether the devices stepped Devices.Steps batches and
// stopped: the pipeline steps nothing more, and State is final.
func (p *Pipeline) Stopped() bool { return p.pipe.budget.isSpent() }

// RunEpochs runs passes (Reset between them) until the job has read
// epochs epochs of the order, counted from the start of the job (a
// pipeline resumed from a State starts in its epoch and does what is left
// of them), or until the devices stepped Devices.Steps batches. Either way
// it returns nil, and State is where the job stands. With a multi-pass
// stage, a pass reads several epochs; a pipeline without the order counts
// its passes from 0.
func (p *Pipeline) RunEpochs(ctx context.Context, epochs int) error {
	for p.nextEpoch() < epochs && !p.Stopped() {
		if p.passDone() {
			if err := p.Reset(); err != nil {
				return err
			}
		}
		if err := p.Run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// nextEpoch is the first epoch of the order the next run of the pipeline
// reads: the current pass's, or, once it ran to its end, the next one's.
func (p *Pipeline) nextEpoch() int {
	p.mu.Lock()
	pass, ended := p.pass, p.passEnded()
	p.mu.Unlock()
	if ended {
		pass++
	}
	if p.order == nil {
		return int(pass)
	}
	lo, _ := p.order.passesOf(pass)
	return p.order.Epoch(lo)
}

// passDone says whether the current pass ran to its end.
func (p *Pipeline) passDone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passEnded()
}

// devicesIdle reports whether every device consumed all it received.
func (p *Pipeline) devicesIdle() bool {
	for _, s := range p.sinks {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// Shutdown stops the pipeline, letting every stage handle what its mailbox
// already holds, and waits for the stages and their goroutines to end. When
// ctx ends first it aborts as Close does. Afterwards every call returns
// ErrShutdown. It returns within Options.StopGrace of its abort whatever
// user code does: code that ignores its cancellation is abandoned, and
// Shutdown then returns an error wrapping ErrAbandoned that names it.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if !p.markClosed() {
		return nil
	}
	fut := p.sys.Root.PoisonFuture(p.top)
	done := make(chan struct{})
	go func() { fut.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.sys.Root.Stop(p.top)
		<-done
	}
	return p.finish()
}

// Close aborts the pipeline at once: stages stop without handling what their
// mailboxes hold. It waits for the stages and their goroutines to end,
// within Options.StopGrace for user code that ignores its cancellation,
// which it abandons and names in an error wrapping ErrAbandoned; the
// pipeline is closed all the same.
func (p *Pipeline) Close() error {
	if !p.markClosed() {
		return nil
	}
	err := p.sys.Root.StopFuture(p.top).Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // stopped without an answer in time: the actors are gone all the same
	}
	return errors.Join(err, p.finish())
}

func (p *Pipeline) markClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.closed = true
	p.pipe.fail(ErrShutdown)
	return true
}

// finish releases what the actors used once they are gone, and reports the
// user code they abandoned.
func (p *Pipeline) finish() error {
	p.pool.close()
	if p.gather != nil {
		p.gather.close()
	}
	for _, q := range p.queues {
		q.Close()
	}
	if p.own {
		p.sys.Shutdown()
	}
	abandoned := p.pipe.abandonedErr()
	if p.pipe.storage != nil {
		p.pipe.storage.close(abandoned != nil)
	}
	return abandoned
}

// Stats are a pipeline's counters.
type Stats struct {
	// Restarts of stage actors so far.
	Restarts int
	// PeakLiveBatches is the most batches made by the batch stage and not
	// yet consumed at any moment since the last Reset.
	PeakLiveBatches int
	// Recycled is the number of batches made in the storage of batches the
	// devices had stepped (Devices.Recycle) or Next's reader gave back
	// (Recycle).
	Recycled int
	// RecycledGroups is the number of groups the file readers stacked into
	// the storage of groups already batched (see Batch); the rest were
	// fresh allocations.
	RecycledGroups int
	// Skipped is the number of corrupt records skipped in the current pass,
	// samples a map could not read (SampleMapFunc) among them,
	// known once the pass has ended (0 before).
	Skipped uint64
	// Corrupt lists the damaged chunks, and the samples a map could not
	// read, skipped so far in any pass, each once, at most the first 100;
	// CorruptChunks counts them all.
	Corrupt       []CorruptChunk
	CorruptChunks int
	// Devices holds one entry per device.
	Devices []DeviceStats
}

// Stats returns the pipeline's counters.
func (p *Pipeline) Stats() Stats {
	st := Stats{Restarts: int(p.pipe.restarts.Load()), PeakLiveBatches: int(p.pipe.peak.Load()),
		Recycled: int(p.pipe.reused.Load()), RecycledGroups: p.pipe.blocks.reusedCount()}
	pass := uint32(p.Pass())
	p.pipe.mu.Lock()
	st.Skipped = p.pipe.skipped[pass]
	p.pipe.mu.Unlock()
	st.Corrupt, st.CorruptChunks = p.pipe.corrupt.snapshot()
	for _, d := range p.devices {
		st.Devices = append(st.Devices, d.snapshot())
	}
	return st
}

// StageStats are one stage's counters, as of the last message it handled.
type StageStats struct {
	Stage string // its name: position-kind, and /reader-k for file readers
	Kind  string
	// Items produced (by a consumer: consumed), in all passes.
	Items int64
	// Held is the stage's buffer depth: items produced and not yet
	// acknowledged downstream (queued, for a consumer).
	Held int
	// Demand is the demand outstanding on its upstream link.
	Demand   int64
	Restarts int
}

// StageStats returns every stage's counters, sources first. It is safe to
// call at any time from any goroutine.
func (p *Pipeline) StageStats() []StageStats {
	out := make([]StageStats, len(p.cells))
	for i, c := range p.cells {
		out[i] = StageStats{Stage: c.name, Kind: c.kind, Items: c.meter.items.Load(), Held: int(c.meter.held.Load()),
			Demand: c.meter.demand.Load(), Restarts: int(c.meter.restarts.Load())}
	}
	return out
}

// DeviceStats are one device's counters.
type DeviceStats struct {
	Device    int
	Batches   int
	Instances int
	Busy      time.Duration // time in steps
	Wait      time.Duration // time waiting for data
}

// deviceCounter accumulates a device's DeviceStats.
type deviceCounter struct {
	mu sync.Mutex
	st DeviceStats
}

func (d *deviceCounter) add(wait, busy time.Duration, instances int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.st.Batches++
	d.st.Instances += instances
	d.st.Busy += busy
	d.st.Wait += wait
}

func (d *deviceCounter) snapshot() DeviceStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st
}
