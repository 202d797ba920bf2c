package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// shared is the state of one pipeline that its stages and its handle both
// see: options, the terminal error, counters.
type shared struct {
	opts   Options
	root   *actor.RootContext
	faults Injector

	restarts atomic.Int64
	live     atomic.Int64 // batches made by the batch stage and not yet consumed
	ahead    atomic.Int64 // of them, read ahead into the next pass by the double buffer
	peak     atomic.Int64
	counting bool // a batch stage exists: live counts its batches

	// recycled holds the storage of stepped batches for the batch stage to
	// reuse (Devices.Recycle); nil when storage is not recycled.
	recycled chan tensor.Slots
	reused   atomic.Int64 // batches made in recycled storage

	// blocks recycles the file readers' stacked groups once the batch
	// stage copied them; nil unless the stages between are shuffles.
	blocks *blockPool

	mu      sync.Mutex
	err     error
	done    chan struct{}     // closed when the pipeline ends (error or shutdown)
	causes  map[string]error  // in-process causes of stage failures, by stage
	ends    map[string]uint32 // consumer -> pass it saw the end of
	ended   chan struct{}     // closed and replaced when a consumer ends a pass
	skipped map[uint32]uint64 // pass -> corrupt records skipped
	// abandoned names the user code that a stop gave up waiting for.
	abandoned []string
	// source is the pipeline's source, which names the files in sample ids.
	source Source
}

// sampleName names a sample by its id: its record and file.
func (s *shared) sampleName(id uint64) string {
	f, r := messages.SplitID(id)
	name := fmt.Sprintf("file %d", f)
	if s.source != nil {
		name = s.source.Name(f)
	}
	return fmt.Sprintf("record %d of %s", r, name)
}

// abandon records user code that a stop gave up waiting for.
func (s *shared) abandon(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandoned = append(s.abandoned, what)
}

// abandonedErr is ErrAbandoned naming what was abandoned, or nil.
func (s *shared) abandonedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.abandoned) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%v after cancellation): %s", ErrAbandoned, s.opts.StopGrace, strings.Join(s.abandoned, ", "))
}

func newShared(opts Options, root *actor.RootContext) *shared {
	return &shared{opts: opts, root: root, faults: opts.Faults, done: make(chan struct{}),
		causes: map[string]error{}, ends: map[string]uint32{}, ended: make(chan struct{}), skipped: map[uint32]uint64{}}
}

// recycle offers the storage of a stepped batch for reuse; it is dropped
// when enough is waiting already.
func (s *shared) recycle(slots tensor.Slots) {
	if s.recycled == nil {
		return
	}
	select {
	case s.recycled <- slots:
	default:
	}
}

// reusable takes recycled storage, if any is waiting.
func (s *shared) reusable() tensor.Slots {
	select {
	case slots := <-s.recycled: // a nil channel never yields
		s.reused.Add(1)
		return slots
	default:
		return nil
	}
}

// terminal is the error that ended the pipeline, nil while it runs.
func (s *shared) terminal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fail ends the pipeline with err; the first error wins.
func (s *shared) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// record keeps the in-process cause of a stage's failure for the error the
// sink will build from the Failure message.
func (s *shared) record(stage string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.causes[stage]; !ok {
		s.causes[stage] = err
	}
}

// stageError turns a Failure into the error Next returns.
func (s *shared) stageError(f *messages.Failure) error {
	s.mu.Lock()
	cause := s.causes[f.Stage]
	s.mu.Unlock()
	var se *StageError
	if errors.As(cause, &se) {
		return se
	}
	if cause == nil {
		cause = errors.New(f.Cause)
	}
	return &StageError{Stage: f.Stage, File: f.File, Offset: f.Offset, Record: -1, Class: f.Class, Err: cause}
}

// passEnded notes that consumer saw the end of pass.
func (s *shared) passEnded(consumer string, e *messages.End) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends[consumer] = e.Pass
	s.skipped[e.Pass] = e.Skipped
	close(s.ended)
	s.ended = make(chan struct{})
}

// changed wakes Run: a device consumed the last item it held.
func (s *shared) changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ended)
	s.ended = make(chan struct{})
}

func (s *shared) noteProduced(kind string, _ *messages.Batch) {
	if kind != KindBatch {
		return
	}
	n := s.live.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (s *shared) noteConsumed(*messages.Batch) {
	if s.counting {
		s.live.Add(-1)
	}
}

func (s *shared) noteDropped(b *messages.Batch) { s.noteConsumed(b) }

// Injector sees every protocol message before its stage handles it, with
// the stage's name and kind and the message's number (from 1) at that
// stage; it may panic to simulate a crash. Counts survive restarts, so a
// fault scheduled at message n fires once.
type Injector interface {
	BeforeMessage(stage, kind string, n int64, msg any)
}

// PanicAt panics the N-th message of every stage that matches Stage (by
// name) or Kind, whichever is set.
type PanicAt struct {
	Stage, Kind string
	N           int64
}

// BeforeMessage implements Injector.
func (p PanicAt) BeforeMessage(stage, kind string, n int64, _ any) {
	if n == p.N && (p.Stage == "" || p.Stage == stage) && (p.Kind == "" || p.Kind == kind) {
		panic(fmt.Sprintf("injected panic at message %d of %s", n, stage))
	}
}

// Faults combines injectors.
type Faults []Injector

// BeforeMessage implements Injector.
func (f Faults) BeforeMessage(stage, kind string, n int64, msg any) {
	for _, i := range f {
		i.BeforeMessage(stage, kind, n, msg)
	}
}

// ---- sources ----

// fileSource opens the files of a Files stage; it seeks to a record by the
// reader's Seek when it has one, by reading otherwise. A RecordIO file's
// chunk index is read once and kept, so reopening the file at a record
// after a transient error reads no chunk header again.
type fileSource struct {
	entries []string
	names   []string
	open    func(ctx context.Context, entry string) (readers.Reader, error)

	mu      sync.Mutex
	indexes map[int]*recordio.Index
}

// indexed is a reader that can seek with a kept chunk index.
type indexed interface {
	Index() (*recordio.Index, error)
	SeekIndexed(x *recordio.Index, rec int) error
}

func newFileSource(entries []string, open func(context.Context, string) (readers.Reader, error)) (*fileSource, error) {
	s := &fileSource{entries: entries, names: make([]string, len(entries)), open: open, indexes: map[int]*recordio.Index{}}
	if len(entries) > messages.MaxFiles {
		return nil, fmt.Errorf("%w: %d files, at most %d", ErrBadSpec, len(entries), messages.MaxFiles)
	}
	for i, e := range entries {
		_, path, err := readers.ParseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
		s.names[i] = path
	}
	return s, nil
}

func (s *fileSource) Rewindable() bool     { return true }
func (s *fileSource) Name(file int) string { return s.names[file] }

func (s *fileSource) Open(ctx context.Context, file int, _ uint32, from uint64) (readers.Reader, error) {
	r, err := s.open(ctx, s.entries[file])
	if err != nil {
		return nil, err
	}
	if from == 0 {
		return r, nil
	}
	if ix, ok := r.(indexed); ok {
		if err := s.seek(file, ix, int(from)); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
	if sk, ok := r.(interface{ Seek(int) error }); ok {
		if err := sk.Seek(int(from)); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
	for k := uint64(0); k < from; k++ {
		if _, err := r.Next(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("actors: skipping to record %d of %s: %w", from, s.names[file], err)
		}
	}
	return r, nil
}

// seek moves r to record rec of file, reading the file's index the first
// time only.
func (s *fileSource) seek(file int, r indexed, rec int) error {
	s.mu.Lock()
	x := s.indexes[file]
	s.mu.Unlock()
	if x == nil {
		var err error
		if x, err = r.Index(); err != nil {
			return err
		}
		s.mu.Lock()
		s.indexes[file] = x
		s.mu.Unlock()
	}
	return r.SeekIndexed(x, rec)
}

// queueSource reads a feed queue: one "file" that continues across opens.
// Its readers pop and nothing more: a restarted file reader must not close
// the queue. The pipeline closes it when it shuts down.
type queueSource struct{ q *readers.FeedQueue }

func (s queueSource) Rewindable() bool { return false }
func (s queueSource) Name(int) string  { return "feed queue" }
func (s queueSource) Open(context.Context, int, uint32, uint64) (readers.Reader, error) {
	return queuePopper{s.q}, nil
}

type queuePopper struct{ q *readers.FeedQueue }

func (r queuePopper) Next(ctx context.Context) (tensor.Slots, error) { return r.q.Pop(ctx) }
func (r queuePopper) Reset() error                                   { return readers.ErrResetUnsupported }
func (r queuePopper) Close() error                                   { return nil }

// Item is what a pipeline delivers: a batch (or a group of instances, for
// a chain without a batch stage) with the id of every instance.
type Item struct {
	Slots tensor.Slots
	// IDs holds one id per instance: messages.SplitID gives the file's index
	// in the pipeline's list and the record's index in the file.
	IDs  []uint64
	Pass int
	// Seq is the item's position in its pass, from 0. With N devices, item
	// Seq is stepped by device Seq mod N.
	Seq       int
	Instances int
}

// toItem converts a message delivered to this consumer: its lane of the
// double buffer carries items lane, lane+lanes, lane+2*lanes, ...
func (c *consumerCell) toItem(b *messages.Batch) (Item, error) {
	slots, err := b.ToSlots()
	if err != nil {
		return Item{}, err
	}
	seq := int(b.Seq)*int(c.lanes) + int(c.lane)
	return Item{Slots: slots, IDs: b.Ids, Pass: int(b.Pass), Seq: seq, Instances: len(b.Ids)}, nil
}
