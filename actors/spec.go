package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/supervisor"
)

// Stage kinds, as they appear in stage names, errors and fault injection.
const (
	KindFileReader   = "file_reader"
	KindFiles        = "open_files"
	KindShuffle      = "shuffle"
	KindBatch        = "batch"
	KindMap          = "map"
	KindXMap         = "xmap"
	KindMultiPass    = "multi_pass"
	KindDoubleBuffer = "double_buffer"
	KindDevice       = "device"
	KindSink         = "sink"
)

// Stage is the spec of one stage of a pipeline; the first stage of a chain
// is a source (Files or Queue), the others decorate the stage before them.
type Stage interface{ kind() string }

// Files is open_files: Threads file-reader actors read the files of Paths
// (each "format:path" or a path whose suffix names its format) and feed one
// buffer. One path and one thread is create_recordio_file_reader.
//
// Records come in the order (docs/determinism.md), a pure function of the
// files, the seed and the epoch, whatever the number of readers and their
// timing: the files' splits (RecordIO chunks) in list order, or, when a
// Shuffle stage follows, permuted by its seed and the epoch and then
// shuffled in windows of its Window. Options.Shard gives this process its
// rank's share. Building the pipeline reads every file's chunk index.
type Files struct {
	Paths []string
	// Threads is thread_num; default NumCPU, at least ObjectThreads when
	// a path is an object's URL, and never more readers than pieces of
	// work: in the order the readers share the files' splits (RecordIO
	// chunks), with AnyOrder each reads whole files.
	Threads int
	// Buffer is buffer_size, in groups of Options.GroupSize samples;
	// default 3 * Threads, as upstream, and Threads in the order: there the
	// stage after it holds a window being assembled besides, and groups
	// buffered longer reach the batch stage's copy colder
	// (docs/performance.md).
	Buffer int
	// AnyOrder hands records on as the readers deliver them, instead of in
	// the order (docs/determinism.md): the order of a pass then depends on
	// the readers' timing, and the pipeline has no State.
	AnyOrder bool
	// Slots, when set, declares every record's slots (shapes with -1
	// wildcards, dtypes, LoD levels); a record that differs fails the
	// pipeline with an error naming the file and record.
	Slots []readers.SlotSpec
	// Blend, when not nil, makes every epoch a weighted mixture of the
	// files, one weight a path (order.Blend, docs/tokens.md): the files
	// must be read by position, and a Shuffle stage after Files may only
	// be global (or none), which then permutes each file's own epochs.
	Blend *order.Blend
	// BlendSteps are the global steps (Shard.GlobalBatch) where Blend's
	// phases start, one a phase: the pipeline sets each phase's From from
	// it (order.StepStart). Empty, the phases' From stand.
	BlendSteps []uint64
}

// Generator is a source of one endless or finite stream that New opens
// afresh for every pass (create_random_data_generator): a new reader must
// yield the same items in the same order, since a restarted reader skips
// what was already taken in. Name names it in errors and sample ids.
type Generator struct {
	Name string
	New  func() (readers.Reader, error)
}

// Queue is create_py_array_reader: the items outside producers push into a
// feed queue. A queue cannot be read twice, so its items are kept until the
// next stage took them in, and no MultiPass stage may follow it. A pass is
// what is pushed until the queue is closed; Reset re-opens a closed queue
// for the next pass, whose items the producer pushes after Reset returns
// (nothing reads a queue's next pass ahead), unless the producer re-opened
// it itself since the last pass began (FeedQueue.ReOpen): then what it
// pushed, and a close, are the next pass's.
type Queue struct{ Queue *readers.FeedQueue }

// Shuffle is create_shuffle_reader (see readers.Shuffle). Right after
// Files it is the order's shuffle: the files' splits are permuted and then
// windows of Window records; with Global, every epoch is a uniformly
// random permutation of all the records, read by position
// (docs/determinism.md, "The global order").
type Shuffle struct {
	Window int
	Seed   uint64
	// Global permutes the whole data set each epoch, in a memory and a
	// start-up that do not grow with it. Window must be 0; the Shuffle
	// must follow Files, and every file be readers.Positional.
	Global bool
	// OrWindow, with Global, is the window to shuffle in instead when a
	// file of the data set cannot be read by position (RecordIO, a gzip'd
	// file without its decoded copy, an object outside the object cache):
	// Pipeline.Windowed then says which and why. 0 refuses such a data set.
	// The Python loader's shuffle=True.
	OrWindow int
}

// Batch is create_batch_reader. It copies the instances of each batch
// into storage of its own. When the stages before it are the files and
// shuffles only, nothing else reads the file readers' groups, and the
// storage of a group is recycled for a later group once the batch stage
// has copied all of its rows (Stats.RecycledGroups counts them).
type Batch struct {
	Size     int
	DropLast bool
}

// Map applies Fn to every item (see MapFunc). Name is what a service's
// workers know Fn by (WorkerOptions.Maps): a pipeline with Options.Service
// runs the map on its workers, which need every map named.
type Map struct {
	Fn MapFunc
	// Samples is a function that also sees the item's samples and epoch,
	// in place of Fn.
	Samples SampleMapFunc
	Name    string
}

// XMap is xmap_readers: Fn runs on Workers goroutines the stage owns
// (default NumCPU), with at most Workers+Buffer items (Buffer defaults to
// Workers) between intake and hand-off. With Ordered, or behind Files in
// an order, items leave in the order they came; otherwise as they finish,
// so the order can differ from run to run (the items never do). Fn runs on several goroutines at once
// and must be safe for that; stopping the stage waits for the item each
// worker is on, so Fn should not block.
type XMap struct {
	Fn      MapFunc
	Samples SampleMapFunc // in place of Fn (see Map)
	Workers int
	Buffer  int
	Ordered bool
	// Name is what a service's workers know Fn by (see Map).
	Name string
}

// MultiPass is create_multi_pass_reader.
type MultiPass struct{ Passes int }

// DoubleBuffer is create_double_buffer_reader: a prefetch window of Window
// batches per consumer (default 2), and behind it each consumer queues up
// to max(Window, MinConsumerQueue) batches. Item k of a pass goes to
// consumer k mod n. With DropPartial, a last step with fewer items than
// consumers is dropped.
type DoubleBuffer struct {
	Window      int
	DropPartial bool
}

// window is Window, default applied.
func (d DoubleBuffer) window() int { return cmp.Or(d.Window, 2) }

func (Files) kind() string        { return KindFiles }
func (Queue) kind() string        { return KindFiles }
func (Generator) kind() string    { return KindFiles }
func (Shuffle) kind() string      { return KindShuffle }
func (Batch) kind() string        { return KindBatch }
func (Map) kind() string          { return KindMap }
func (XMap) kind() string         { return KindXMap }
func (MultiPass) kind() string    { return KindMultiPass }
func (DoubleBuffer) kind() string { return KindDoubleBuffer }

// Devices are the consumers of a pipeline that trains: N device actors, each
// running Step (or sleeping StepTime when Step is nil) on the batches of
// its lane.
type Devices struct {
	N        int
	Step     StepFunc
	StepTime time.Duration
	// Recycle lets the batch stage make new batches in the storage of
	// batches the devices have stepped, saving an allocation (and its
	// garbage) per batch. Step must then not keep the item's tensors, or
	// views of them, after it returns: copy what it keeps (Slots.Clone).
	// Storage is recycled only when the batch stage is the last one before
	// the double buffer, so that a device's batch is wholly the batch
	// stage's own; Stats.Recycled counts the batches made so.
	Recycle bool
	// Storage, when set, is the memory batches are made in (page-locked
	// memory a GPU copies from, say), recycled as with Recycle, which it
	// implies: Step must not keep the item's tensors. The batch stage must
	// be the last one before the double buffer.
	Storage Storage
	// Steps, when positive, is how many batches the devices step in all,
	// over every pass, before they stop, as a trainer stops at a step to
	// save a checkpoint: Run and RunEpochs then return nil, Stopped says
	// so, and State is where they stopped (the steps are not ordered
	// across devices, so it may list batches committed past its
	// position).
	Steps int
}

// DefaultGroupSize is Options.GroupSize's default: each message costs
// about a microsecond of actor machinery, which smaller groups pay more
// often for small samples (docs/performance.md).
const DefaultGroupSize = 128

// DefaultGroupBytes is Options.GroupBytes's default, a RecordIO chunk's
// default size. A group's block is allocated for as many samples as it may
// hold, and zeroed in full however few it gets: without a bound in bytes,
// large images made blocks of many megabytes for groups that ended after a
// chunk's few samples (docs/performance.md). 128 Fashion-MNIST samples are
// 101 KB, well under it.
const DefaultGroupBytes = 1 << 20

// Options tune a pipeline. The zero value is usable.
type Options struct {
	// System is the actor system to spawn in; nil makes one (NewSystem) that
	// the pipeline owns. Make shared systems with NewSystem too: one from
	// actor.NewActorSystem works, but keeps a large process registry for
	// the collector to mark on every cycle.
	System *actor.ActorSystem
	// GroupSize is how many samples file readers put in one message; the
	// stages before batching move groups, never single samples. Default
	// DefaultGroupSize.
	GroupSize int
	// GroupBytes bounds the bytes of samples in a group's block: a group
	// of large samples holds fewer than GroupSize, at least one. Default
	// DefaultGroupBytes.
	GroupBytes int
	// Lanes is how many copies of the stages between the order's assembly
	// (Files and the Shuffle right after it) and the double buffer (batch
	// and maps) run side by side, so that the per-batch work spreads over
	// the cores: a deal stage hands them the order's items in turn, a
	// merge stage takes their batches back in the same turn, and the order
	// does not depend on Lanes. A lane holds what its stages and two
	// links' windows hold, nothing more. Default 1. Lanes need a Files
	// source in the order, one Batch stage and no MultiPass stage; a
	// DoubleBuffer is added when the chain has none.
	Lanes int
	// Service, when set, runs the stages before the double buffer on the
	// service's worker nodes instead of in this process (see Service).
	Service *Service
	// ReaderWindow is how many groups a file reader may have in flight.
	// Default 2.
	ReaderWindow int
	// Capacity is how many produced items a decorator stage holds unsent
	// before it stops asking for input. Default 2. A shuffle stage holds
	// a window's worth of items more (ceil(Window/GroupSize)), references
	// into groups it holds anyway, so that it fills the next window while
	// the last is batched.
	Capacity int
	// Window is the demand window on links into decorators and into the
	// pipeline's own sink. Default 2. A stage asks for more in steps of
	// half of min(Window, Capacity), so with both at 8 one Demand message
	// stands for about four items (docs/protocol.md).
	Window int
	// OnCorrupt says what file readers do with corrupt records.
	OnCorrupt supervisor.CorruptPolicy
	// Retry is the schedule for transient I/O errors; default
	// supervisor.DefaultBackoff().
	Retry supervisor.Backoff
	// ReadTimeout bounds opening a file and reading one group of records
	// (GroupSize). A call that takes longer is abandoned as a transient
	// error (ErrReadStalled): the context the file was opened with is
	// cancelled and the file reopened at the record it was on, on the Retry
	// schedule. Default 30 s; negative disables it.
	// Only reads that heed their context can be abandoned (a read blocked
	// in the kernel cannot). A feed queue's reader has no timeout: it
	// waits for its producer.
	ReadTimeout time.Duration
	// Intensity bounds restarts; default supervisor.DefaultIntensity().
	Intensity supervisor.Intensity
	// Faults, when set, sees every message before its stage does; fault
	// injection uses it to panic stages (package sim).
	Faults faults.Injector
	// Open opens files for the file readers; default OpenFile. Fault
	// injection wraps it.
	Open func(ctx context.Context, entry string) (readers.Reader, error)
	// Shard is this process's rank among the ranks that read the data set
	// together; the zero value reads all of it.
	Shard Shard
	// Indexes, when set, keeps the files' indexes for the next pipeline
	// over them (IndexCache): a Service worker's tasks share one.
	Indexes *IndexCache
	// Resume, when set, starts the pipeline where a stopped job over the
	// same files and order left off: this rank's own State, to go on on
	// the same Shard.World; or the States of every rank of the job (in
	// any order), to go on on any World, whatever step each rank stopped
	// at. Ranks that stopped at different steps have what none of them
	// delivered re-dealt in equal shares (docs/determinism.md).
	Resume []State
	// Epoch is the epoch a pipeline that does not resume starts in: its
	// pass 0 is that epoch of the order, as a trainer's set_epoch asks
	// (default 0). With Resume, the states say where to start, and Epoch
	// must be 0.
	Epoch int
	// StopGrace is how long stopping a stage (Close, Shutdown, a restart)
	// waits for user code it runs (a device's step, an xmap function, Open)
	// to return once its context is cancelled. Code still running then is
	// abandoned: it is never waited for again and nothing it returns is
	// used, and Close reports it (ErrAbandoned). Default DefaultStopGrace.
	StopGrace time.Duration
}

// DefaultStopGrace is Options.StopGrace's default: well above what a step
// that heeds its context takes to return, and short enough that Close stays
// within about a second whatever user code does.
const DefaultStopGrace = 500 * time.Millisecond

// EnsureDefaults sets every zero field to its default, so that a caller
// can see the values a pipeline runs with; New and NewDevices call it on
// their copy.
func (o *Options) EnsureDefaults() {
	if o.GroupSize <= 0 {
		o.GroupSize = DefaultGroupSize
	}
	if o.GroupBytes <= 0 {
		o.GroupBytes = DefaultGroupBytes
	}
	if o.Lanes <= 0 {
		o.Lanes = 1
	}
	if o.ReaderWindow <= 0 {
		o.ReaderWindow = 2
	}
	if o.Capacity <= 0 {
		o.Capacity = 2
	}
	if o.Window <= 0 {
		o.Window = 2
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.Retry.Attempts == 0 {
		o.Retry = supervisor.DefaultBackoff()
	}
	if o.Intensity.MaxRestarts == 0 && o.Intensity.Within == 0 {
		o.Intensity = supervisor.DefaultIntensity()
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Open == nil {
		o.Open = OpenFile
	}
}

// OpenFile opens a file entry through the readers registry, under ctx
// (readers.OpenContext): an object's reads end with it.
func OpenFile(ctx context.Context, entry string) (readers.Reader, error) {
	return readers.OpenContext(ctx, entry, readers.OpenOptions{})
}

// validate checks a chain before anything is spawned.
func validate(stages []Stage, dev *Devices) error {
	if len(stages) == 0 {
		return fmt.Errorf("%w: no stages", ErrBadSpec)
	}
	for i, s := range stages {
		where := fmt.Sprintf("stage %d (%s)", i, s.kind())
		if err := validateStage(where, s, i == 0, i == len(stages)-1); err != nil {
			return err
		}
		if sh, ok := s.(Shuffle); ok && sh.Global && (i != 1 || stages[0].kind() != KindFiles) {
			return fmt.Errorf("%w: %s: a global shuffle must follow Files: it is the order of the files' records", ErrBadSpec, where)
		}
		if i == 0 && s.kind() != KindFiles {
			return fmt.Errorf("%w: %s: the first stage must be a source (Files, Generator or Queue)", ErrBadSpec, where)
		}
		if _, ok := s.(MultiPass); ok {
			if _, queue := stages[0].(Queue); queue {
				return fmt.Errorf("%w: %s: a feed queue cannot be read more than once; run passes with Reset, the producer pushing each", ErrBadSpec, where)
			}
		}
	}
	if dev == nil {
		return nil
	}
	if dev.Storage != nil {
		if _, ok := stages[len(stages)-1].(DoubleBuffer); ok {
			stages = stages[:len(stages)-1]
		}
		if _, ok := stages[len(stages)-1].(Batch); !ok {
			return fmt.Errorf("%w: Devices.Storage needs a batch stage right before the double buffer, to make the devices' batches", ErrBadSpec)
		}
	}
	return errors.Join(checkSize("devices", "N", dev.N, 1, MaxConcurrency), checkSize("devices", "Steps", dev.Steps, 0, math.MaxInt32))
}

// validateStage checks one stage's fields, and that a source comes first
// and a double buffer last.
func validateStage(where string, s Stage, first, last bool) error {
	switch s := s.(type) {
	case Files:
		if !first {
			return fmt.Errorf("%w: %s: a source must come first", ErrBadSpec, where)
		}
		if len(s.Paths) == 0 {
			return fmt.Errorf("%w: %s: no files", ErrBadSpec, where)
		}
		return errors.Join(checkSize(where, "threads", s.Threads, 0, MaxConcurrency), checkSize(where, "buffer", s.Buffer, 0, MaxQueue))
	case Generator:
		if !first {
			return fmt.Errorf("%w: %s: a source must come first", ErrBadSpec, where)
		}
		if s.New == nil {
			return fmt.Errorf("%w: %s: no New function", ErrBadSpec, where)
		}
	case Queue:
		if !first {
			return fmt.Errorf("%w: %s: a source must come first", ErrBadSpec, where)
		}
		if s.Queue == nil {
			return fmt.Errorf("%w: %s: no queue", ErrBadSpec, where)
		}
	case Shuffle:
		if s.Global && s.Window != 0 {
			return fmt.Errorf("%w: %s: a global shuffle has no window (window %d)", ErrBadSpec, where, s.Window)
		}
		if !s.Global && s.OrWindow != 0 {
			return fmt.Errorf("%w: %s: OrWindow is a global shuffle's (OrWindow %d)", ErrBadSpec, where, s.OrWindow)
		}
		return errors.Join(checkSize(where, "window", s.Window, 0, MaxWindow), checkSize(where, "window", s.OrWindow, 0, MaxWindow))
	case Batch:
		return checkSize(where, "size", s.Size, 1, MaxBatch)
	case Map:
		if (s.Fn == nil) == (s.Samples == nil) {
			return fmt.Errorf("%w: %s: want one function, Fn or Samples", ErrBadSpec, where)
		}
	case XMap:
		if (s.Fn == nil) == (s.Samples == nil) {
			return fmt.Errorf("%w: %s: want one function, Fn or Samples", ErrBadSpec, where)
		}
		return errors.Join(checkSize(where, "workers", s.Workers, 0, MaxConcurrency), checkSize(where, "buffer", s.Buffer, 0, MaxQueue))
	case MultiPass:
		return checkSize(where, "passes", s.Passes, 1, MaxPasses)
	case DoubleBuffer:
		if !last {
			return fmt.Errorf("%w: %s: the double buffer must be the last stage", ErrBadSpec, where)
		}
		return checkSize(where, "window", s.Window, 0, MaxQueue)
	default:
		return fmt.Errorf("%w: %s: unknown stage type %T", ErrBadSpec, where, s)
	}
	return nil
}

// ObjectThreads is the least number of file readers by default when a
// Files stage reads objects: a reader of an object waits out a request's
// round trip at every split it is dealt (the order deals them shuffled, so
// there is no run to read ahead of), and those waits are hidden only by
// other readers' requests in flight.
const ObjectThreads = 8

// readsObject reports whether entry names an object rather than a file.
func readsObject(entry string) bool {
	_, path, err := readers.ParseEntry(entry)
	return err == nil && objstore.IsURL(path)
}

// readers is the stage's file readers and buffer, defaults applied, for
// work that comes in pieces pieces: in the order a reader is handed pieces
// of files (the order's splits, so the readers of one file read it side by
// side, a core each); without it, whole files.
func (s Files) readers(pieces int) (threads, buffer int) {
	threads, buffer = s.Threads, s.Buffer
	if threads == 0 {
		threads = runtime.NumCPU()
		if slices.ContainsFunc(s.Paths, readsObject) {
			threads = max(threads, ObjectThreads)
		}
	}
	threads = max(1, min(threads, pieces))
	if buffer == 0 {
		buffer = 3 * threads
		if !s.AnyOrder {
			buffer = threads
		}
	}
	return threads, buffer
}
