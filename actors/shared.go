package actors

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// shared is the state of one pipeline that its stages and its handle both
// see: options, the terminal error, counters.
type shared struct {
	opts   Options
	root   *actor.RootContext
	faults faults.Injector

	budget *stepBudget // Devices.Steps; nil without a limit

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
	// storage is Devices.Storage and what it gave; nil without one.
	storage *storagePool

	mu      sync.Mutex
	err     error
	done    chan struct{}     // closed when the pipeline ends (error or shutdown)
	causes  map[string]error  // in-process causes of stage failures, by stage
	ends    map[string]uint32 // consumer -> pass it saw the end of
	ended   chan struct{}     // closed and replaced when a consumer ends a pass
	skipped map[uint32]uint64 // pass -> corrupt records skipped
	corrupt corruptLog        // the damaged chunks skipped, each once
	// abandoned names the user code that a stop gave up waiting for.
	abandoned []string
	// source is the pipeline's source, which names the files in sample ids.
	source recordSource
	// order is the pipeline's order, nil when it has none; commits track
	// where its consumers stand in it.
	order   *orderPlan
	commits commits
}

// epoch is the epoch of the order that pass reads (pass itself without one).
func (s *shared) epoch(pass uint32) int {
	if s.order == nil {
		return int(pass)
	}
	return s.order.Epoch(pass)
}

// itemEpoch is the epoch of the order that item b of pass belongs to.
func (s *shared) itemEpoch(b *messages.Batch, pass uint32) int {
	if s.order != nil && b.Positions > 0 {
		return s.order.Epoch(b.OrderPass)
	}
	return s.epoch(pass)
}

// sampleName names a sample by its id: its record and file, and its key
// in a WebDataset shard. It is for errors: it may open the file.
func (s *shared) sampleName(id uint64) string {
	f, r := messages.SplitID(id)
	name := s.fileName(f)
	if k, ok := s.source.(interface{ sampleKey(file, record int) string }); ok {
		if key := k.sampleKey(f, r); key != "" {
			return fmt.Sprintf("sample %s (record %d) of %s", key, r, name)
		}
	}
	return fmt.Sprintf("record %d of %s", r, name)
}

// fileName is file f of the pipeline's list, as its source names it.
func (s *shared) fileName(f int) string {
	if s.source == nil {
		return fmt.Sprintf("file %d", f)
	}
	return s.source.Name(f)
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
		if s.storage != nil {
			s.storage.free(slots)
		}
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

// discard forgets a batch no device was given (a stage upstream of the
// consumers dropped it): its Devices.Storage goes back at once. A batch
// queued at a device may be under its step, and is freed at Close.
func (s *shared) discard(b *messages.Batch) {
	s.noteDropped(b)
	if s.storage != nil {
		for _, t := range b.GetSlots() {
			s.storage.freeBytes(t.GetData())
		}
	}
}
