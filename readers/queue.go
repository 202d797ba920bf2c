package readers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/actorfeed/actorfeed/tensor"
)

// Errors of the feed queue.
var (
	// ErrQueueClosed is returned by Push after Close, including to a Push
	// that was blocked on a full queue when Close came.
	ErrQueueClosed = errors.New("readers: feed queue closed")
	// ErrQueueKilled is wrapped by the error Push and Pop return after Kill;
	// the error given to Kill is wrapped too.
	ErrQueueKilled = errors.New("readers: feed queue killed")
	// ErrAlreadyInitialized is returned by FeedQueueHolder.InitOnce after
	// the first call.
	ErrAlreadyInitialized = errors.New("readers: feed queue holder already initialized")
	// ErrNotInitialized is returned when a holder's queue is used before
	// InitOnce.
	ErrNotInitialized = errors.New("readers: feed queue holder not initialized")
)

// FeedQueue is the bounded blocking queue that outside producers push
// instances into and a reader pops from (PaddlePaddle Fluid's PyArrayFeedQueue). It is
// safe for concurrent use by any number of producers and consumers.
type FeedQueue struct {
	specs []SlotSpec

	mu      sync.Mutex
	cond    sync.Cond
	ring    []tensor.Slots
	head    int
	n       int
	closed  bool
	killed  error
	waiting int    // goroutines blocked in Push or Pop
	opened  uint64 // re-openings (ReOpen, ReOpenClosed)
}

// NewFeedQueue returns a queue that holds at most capacity items, each
// checked against specs on Push (no check if specs is empty).
func NewFeedQueue(capacity int, specs []SlotSpec) (*FeedQueue, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("readers: feed queue capacity %d must be at least 1", capacity)
	}
	q := &FeedQueue{specs: specs, ring: make([]tensor.Slots, capacity)}
	q.cond.L = &q.mu
	return q, nil
}

// wait blocks on the condition until it is signalled or ctx is done; the
// caller holds q.mu.
func (q *FeedQueue) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	q.waiting++
	q.cond.Wait()
	q.waiting--
	stop()
	return ctx.Err()
}

// Push appends item, blocking while the queue is full. It returns
// ErrQueueClosed once the queue is closed, an error wrapping ErrQueueKilled
// once it is killed, ctx.Err() if ctx ends first, and a shape error naming
// the slot if item does not match the declared slots.
func (q *FeedQueue) Push(ctx context.Context, item tensor.Slots) error {
	if len(q.specs) > 0 {
		if err := CheckSlots(q.specs, item); err != nil {
			return fmt.Errorf("readers: feed queue push: %w", err)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.killed != nil:
			return q.killed
		case q.closed:
			return ErrQueueClosed
		case q.n < len(q.ring):
			q.ring[(q.head+q.n)%len(q.ring)] = item
			q.n++
			q.cond.Broadcast()
			return nil
		}
		if err := q.wait(ctx); err != nil {
			return err
		}
	}
}

// Pop removes the oldest item, blocking while the queue is empty. After
// Close it still hands out the queued items and then returns io.EOF; after
// Kill it returns the kill error at once.
func (q *FeedQueue) Pop(ctx context.Context) (tensor.Slots, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.killed != nil:
			return nil, q.killed
		case q.n > 0:
			item := q.ring[q.head]
			q.ring[q.head] = nil
			q.head = (q.head + 1) % len(q.ring)
			q.n--
			q.cond.Broadcast()
			return item, nil
		case q.closed:
			return nil, io.EOF
		}
		if err := q.wait(ctx); err != nil {
			return nil, err
		}
	}
}

// Close ends the input: blocked and later pushes fail with ErrQueueClosed,
// queued items stay readable, then Pop returns io.EOF. Closing twice is
// harmless.
func (q *FeedQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Kill aborts the queue because of cause (a producer's error): queued items
// are dropped, and every blocked or later Push and Pop returns an error
// wrapping ErrQueueKilled and cause, so the consumer learns why instead of
// seeing an early end.
func (q *FeedQueue) Kill(cause error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.killed != nil {
		return
	}
	if cause == nil {
		q.killed = ErrQueueKilled
	} else {
		q.killed = fmt.Errorf("%w: %w", ErrQueueKilled, cause)
	}
	clear(q.ring)
	q.head, q.n = 0, 0
	q.cond.Broadcast()
}

// ReOpen empties the queue and makes it usable again after Close or Kill.
func (q *FeedQueue) ReOpen() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reopen()
	q.killed = nil
}

func (q *FeedQueue) reopen() {
	clear(q.ring)
	q.head, q.n = 0, 0
	q.closed = false
	q.opened++
	q.cond.Broadcast()
}

// Opened counts the queue's re-openings: a pipeline notes it when a pass
// starts, so that its Reset tells the close that ended that pass from one
// that a producer who re-opened the queue since made (ReOpenClosed).
func (q *FeedQueue) Opened() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.opened
}

// ReOpenClosed re-opens the queue, as ReOpen does, if it was closed and
// has not been re-opened since Opened was since; it leaves an open or
// killed queue as it is, and one a producer re-opened since (what it
// pushed, and a close that ends its pass, are the next pass's). A
// pipeline's Reset calls it; it returns Opened after it.
func (q *FeedQueue) ReOpenClosed(since uint64) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed && q.killed == nil && q.opened == since {
		q.reopen()
	}
	return q.opened
}

// Size is the number of queued items.
func (q *FeedQueue) Size() int { q.mu.Lock(); defer q.mu.Unlock(); return q.n }

// Cap is the capacity.
func (q *FeedQueue) Cap() int { return len(q.ring) }

// Full reports whether Push would block.
func (q *FeedQueue) Full() bool { return q.Size() == q.Cap() }

// Empty reports whether no item is queued.
func (q *FeedQueue) Empty() bool { return q.Size() == 0 }

// FeedQueueHolder defers creating a queue until its parameters are known
// and allows that only once (PyArrayFeedQueueHolder). The zero value is
// ready to use and safe for concurrent use.
type FeedQueueHolder struct {
	mu sync.Mutex
	q  *FeedQueue
}

// InitOnce creates the queue. A second call returns ErrAlreadyInitialized.
func (h *FeedQueueHolder) InitOnce(capacity int, specs []SlotSpec) (*FeedQueue, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.q != nil {
		return nil, ErrAlreadyInitialized
	}
	q, err := NewFeedQueue(capacity, specs)
	if err != nil {
		return nil, err
	}
	h.q = q
	return q, nil
}

// Queue is the queue, or nil before InitOnce.
func (h *FeedQueueHolder) Queue() *FeedQueue {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.q
}

type queueReader struct {
	q      *FeedQueue
	closed bool
}

// NewQueueReader returns a reader over q (PyArrayReader). Next pops; Reset
// is refused with ErrResetUnsupported, since what was popped is gone; Close
// closes the queue so blocked producers are released.
func NewQueueReader(q *FeedQueue) Reader { return &queueReader{q: q} }

// NewHolderReader is NewQueueReader for the queue of h, which must be
// initialized.
func NewHolderReader(h *FeedQueueHolder) (Reader, error) {
	q := h.Queue()
	if q == nil {
		return nil, ErrNotInitialized
	}
	return NewQueueReader(q), nil
}

func (r *queueReader) Next(ctx context.Context) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	return r.q.Pop(ctx)
}

func (r *queueReader) Reset() error {
	if r.closed {
		return ErrClosed
	}
	return fmt.Errorf("%w: a feed queue reader cannot start over: its items are gone once read", ErrResetUnsupported)
}

func (r *queueReader) Close() error {
	if !r.closed {
		r.closed = true
		r.q.Close()
	}
	return nil
}
