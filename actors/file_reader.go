package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// Source opens the readers a file-reader actor reads: one per file of the
// pipeline's list and pass. Open returns a reader positioned at record from
// (Rewindable sources) or continuing where the last one stopped (others,
// such as a feed queue, which cannot be read twice).
type Source interface {
	Open(ctx context.Context, file int, pass uint32, from uint64) (readers.Reader, error)
	Rewindable() bool
	// Name names file in errors and sample ids.
	Name(file int) string
}

// workerCell is what a file-reader actor persists: its assignment, the
// cursor of its reading goroutine, and the groups read ahead (handoff, then
// outlet) until the coordinator acknowledges them.
type workerCell struct {
	cell
	src    Source
	slots  []readers.SlotSpec // declared record slots, checked when set
	group  int
	policy supervisor.CorruptPolicy
	retry  supervisor.Backoff

	coord  *actor.PID
	file   int    // assigned file, -1 when idle
	pass   uint32 // of the assignment
	cursor uint64 // records read so far into handoff or outlet
	out    outlet
	tokens chan struct{} // free read-ahead slots: window minus groups held
	freed  uint64        // out.base up to which slots were given back

	mu      sync.Mutex
	handoff []*messages.Batch // read by the goroutine, not yet in out
	ended   *messages.End     // the goroutine reached the end of the file
	failed  *readFailure      // the goroutine failed
}

type readFailure struct {
	offset, record int64
	err            error
}

// poke tells a worker its goroutine put something in the handoff.
type poke struct{}

type workerActor struct {
	c    *workerCell
	read task
}

func newWorkerCell(pipe *shared, name string, src Source, window int) *workerCell {
	c := &workerCell{cell: cell{name: name, kind: KindFileReader, pipe: pipe}, src: src, group: pipe.opts.GroupSize,
		policy: pipe.opts.OnCorrupt, retry: pipe.opts.Retry, file: -1, tokens: make(chan struct{}, window)}
	for range window {
		c.tokens <- struct{}{}
	}
	c.where = func() (string, int64) {
		if c.file < 0 {
			return "", -1
		}
		return src.Name(c.file), int64(c.cursor)
	}
	return c
}

func (a *workerActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() { c.meter.gauge(c.out.held(), 0) }()
	msg, send := c.receive(ctx)
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			c.announce(send)
		}
		return
	case *actor.Stopping:
		// The pipeline is closing: a reader blocked in Options.Open (user
		// code) or in the kernel must not hang Close.
		if !a.read.stopWithin(c.pipe.opts.StopGrace) {
			c.pipe.abandon(fmt.Sprintf("stage %s's read", c.name))
		}
		return
	case *actor.Restarting:
		a.stop()
		return
	case *crashed:
		panic(m.reason)
	case *messages.Assign:
		c.coord = ctx.Sender()
		a.assign(ctx, m)
	case *messages.Demand:
		if err := c.out.onDemand(m); err != nil {
			a.failWith(-1, err)
		}
	case *messages.Cancel:
		if m.Epoch == c.out.epoch {
			a.stop()
			a.reset(-1, 0)
			return
		}
	case *poke:
	default:
		return
	}
	a.drain()
	c.out.flush(send)
	a.release()
}

// assign takes a (re)assignment: the same file and pass resumes, replaying
// what the coordinator has not taken in; anything else starts over at from.
func (a *workerActor) assign(ctx actor.Context, m *messages.Assign) {
	c := a.c
	a.stop()
	a.drain()
	from, resume := uint64(0), false
	if int(m.File) == c.file && m.Pass == c.pass {
		from, resume = c.seqOfRecord(m.From)
	}
	if !resume {
		if !c.src.Rewindable() && int(m.File) == c.file && m.Pass == c.pass {
			a.failWith(-1, fmt.Errorf("%w: assignment from record %d, which was not kept for replay", ErrProtocol, m.From))
			return
		}
		a.reset(int(m.File), m.Pass)
		c.cursor = m.From
	}
	if err := c.out.subscribe(ctx.Sender(), &messages.Subscribe{Epoch: m.Epoch, Pass: m.Pass, From: from}); err != nil {
		a.failWith(-1, err)
		return
	}
	if c.ended == nil && c.failed == nil {
		a.start(ctx)
	}
}

// seqOfRecord finds the kept group that starts at record rec: its sequence
// number, or the next one when rec is where reading stopped.
func (c *workerCell) seqOfRecord(rec uint64) (uint64, bool) {
	for i, b := range c.out.items {
		if b.First == rec {
			return c.out.base + uint64(i), true
		}
	}
	if rec == c.cursor {
		return c.out.produced(), true
	}
	return 0, false
}

// reset forgets the current file, returning the read-ahead slots of every
// group dropped.
func (a *workerActor) reset(file int, pass uint32) {
	c := a.c
	c.mu.Lock()
	n := len(c.handoff)
	c.handoff, c.ended, c.failed = nil, nil, nil
	c.mu.Unlock()
	n += c.out.held()
	c.out.reset(pass)
	c.freed = 0
	a.giveBack(n)
	c.file, c.pass, c.cursor = file, pass, 0
}

func (a *workerActor) giveBack(n int) {
	for range n {
		select {
		case a.c.tokens <- struct{}{}:
		default:
			panic("actors: file reader returned more read-ahead slots than it has")
		}
	}
}

// drain moves what the goroutine read into the outlet.
func (a *workerActor) drain() {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.handoff {
		c.out.push(b)
	}
	c.meter.items.Add(int64(len(c.handoff)))
	c.handoff = c.handoff[:0]
	if c.failed != nil && c.out.fail == nil {
		c.out.fail = failure(c.name, c.src.Name(c.file), c.failed.offset, c.failed.err)
		c.pipe.record(c.name, &StageError{Stage: c.name, File: c.src.Name(c.file), Offset: c.failed.offset,
			Record: c.failed.record, Class: classify(c.failed.err), Err: c.failed.err})
	}
	if c.ended != nil && c.out.end == nil {
		c.out.end = &messages.End{Pass: c.pass, Count: c.ended.Count, Skipped: c.ended.Skipped}
	}
}

// release gives back the slots of groups the coordinator acknowledged
// (the outlet forgot them).
func (a *workerActor) release() {
	c := a.c
	if c.out.base > c.freed {
		a.giveBack(int(c.out.base - c.freed))
	}
	c.freed = c.out.base
}

func (a *workerActor) failWith(offset int64, err error) {
	c := a.c
	c.mu.Lock()
	c.failed = &readFailure{offset: offset, record: -1, err: err}
	c.mu.Unlock()
}

func (a *workerActor) start(ctx actor.Context) {
	c := a.c
	file, pass, from := c.file, c.pass, c.cursor
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.read.start(ctx, context.Background(), func(rctx context.Context) {
		a.readFile(rctx, file, pass, from, func() { root.Send(self, &poke{}) })
	})
}

// stop cancels the reading goroutine and waits for it.
func (a *workerActor) stop() { a.read.stop() }

// readFile is the goroutine: it reads the file in groups, one read-ahead
// slot per group, into the handoff.
func (a *workerActor) readFile(ctx context.Context, file int, pass uint32, from uint64, poke func()) {
	c := a.c
	var r readers.Reader
	// The reader is opened with a context of its own, which its watchdog
	// cancels when a read stalls.
	var w watchdog
	defer func() {
		w.close()
		if r != nil {
			r.Close()
		}
	}()
	open := func() error {
		readCtx := w.open(ctx, c.pipe.opts.ReadTimeout)
		err := w.guard(ctx, func() (err error) {
			r, err = c.src.Open(readCtx, file, pass, from)
			return err
		})
		if errors.Is(err, ErrReadStalled) {
			if r != nil {
				r.Close()
				r = nil
			}
			err = &stalled{file: c.src.Name(file), record: from, after: c.pipe.opts.ReadTimeout}
		}
		return err
	}
	if err := supervisor.Retry(ctx, c.retry, func(int) error { return open() }); err != nil {
		if ctx.Err() == nil {
			// A file that cannot be opened fails at no record: say so,
			// and where reading was to resume when it was not the start.
			record := int64(from)
			if from == 0 {
				record = -1
			}
			a.put(nil, nil, &readFailure{offset: -1, record: record, err: fmt.Errorf("cannot open: %w", err)}, poke)
		}
		return
	}
	rec := from
	stuckAt, tries := uint64(math.MaxUint64), 0 // transient failures at one record
	// Records that stack (one dense instance each, alike in shape) are
	// decoded straight into one block per group (tensor.Stack); others
	// travel as parts of their own.
	st := tensor.NewStack(c.group)
	blocks := c.pipe.blocks
	if blocks != nil {
		st.SetAlloc(blocks.alloc)
	}
	take := func() tensor.Slots { // the group stacked so far, registered for recycling
		s, block := st.TakeBlock()
		if s != nil && blocks != nil {
			rows, _ := s.Instances()
			blocks.register(block, rows)
		}
		return s
	}
	next := func() (tensor.Slots, bool, error) {
		if sr, ok := r.(stackedReader); ok {
			item, err := sr.NextStacked(w.ctx, st)
			return item, err == nil && item == nil, err
		}
		item, err := r.Next(w.ctx)
		return item, false, err
	}
	// A panic in the reader (user code) while a read-ahead slot is held
	// gives the slot back before it reaches the actor: the restarted reader
	// needs it. Without this, ReaderWindow panics left a reader with no slot,
	// waiting forever instead of restarting until the intensity error.
	holding := false
	defer func() {
		if holding {
			if r := recover(); r != nil {
				c.tokens <- struct{}{}
				panic(r)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.tokens:
			holding = true
		}
		first, skipped := rec, uint64(0)
		var parts []tensor.Slots
		ids := make([]uint64, 0, c.group)
		var end bool
		var fail *readFailure
		// The watchdog runs over the group's reads (one timer reset per
		// group, not per record).
		w.arm()
		for len(ids) < c.group {
			item, stacked, err := next()
			if err != nil && w.tripped(ctx) {
				err = &stalled{file: c.src.Name(file), record: rec, after: c.pipe.opts.ReadTimeout}
			}
			// Stacked records all have the first one's dtypes and shapes:
			// checking the first of a group checks them all.
			if err == nil && c.slots != nil && (!stacked || st.Len() == 1) {
				check := item
				if stacked {
					check, err = st.Row(0)
				}
				if err == nil {
					err = readers.CheckSlots(c.slots, check)
				}
				if err != nil {
					if stacked {
						st.Drop()
					}
					err = fmt.Errorf("actors: record %d of %s: %w", rec, c.src.Name(file), err)
				}
			}
			if err == nil {
				if !stacked {
					if s := take(); s != nil {
						parts = append(parts, s)
					}
					parts = append(parts, item)
				}
				ids = append(ids, messages.SampleID(file, int(rec)))
				rec++
				continue
			}
			if errors.Is(err, io.EOF) {
				end = true
				break
			}
			if ctx.Err() != nil {
				c.tokens <- struct{}{}
				return
			}
			if n, ok := skippable(err, r, c.policy); ok {
				skipped += uint64(n)
				rec += uint64(n)
				continue
			}
			if supervisor.Classify(err) == messagesTransient {
				// Reopen at the record that failed and go on, on our own
				// backoff timers. The attempts count per record: a record
				// that keeps failing ends the file after Retry.Attempts.
				if rec != stuckAt {
					stuckAt, tries = rec, 0
				}
				if tries++; tries >= max(c.retry.Attempts, 1) {
					err = fmt.Errorf("%w after %d attempts at record %d: %w", supervisor.ErrRetriesExhausted, tries, rec, err)
				} else if werr := wait(ctx, c.retry.Delay(tries-1, nil)); werr != nil {
					c.tokens <- struct{}{} // stopped: the group is dropped, as above
					return
				} else {
					r.Close()
					r = nil
					from = rec
					if rerr := supervisor.Retry(ctx, c.retry, func(int) error { return open() }); rerr == nil {
						w.arm() // the reopened reader's watchdog, over the rest of the group
						continue
					} else {
						err = rerr
					}
				}
			}
			if ctx.Err() != nil {
				// Stopped while reopening (a reassignment): the read did not
				// fail, it was abandoned, and the group is dropped as above.
				c.tokens <- struct{}{}
				return
			}
			fail = &readFailure{offset: offsetOf(err), record: int64(rec), err: err}
			break
		}
		w.disarm()
		if s := take(); s != nil {
			parts = append(parts, s)
		}
		// A group reports every record it used up, skipped ones included, even
		// when none is left to deliver: the coordinator counts a file done only
		// once its records are all accounted for.
		var b *messages.Batch
		if len(parts) > 0 {
			var err error
			if b, err = messages.FromParts(parts, ids); err != nil {
				fail = &readFailure{offset: -1, record: int64(first), err: fmt.Errorf("actors: records %d..%d of %s: %w", first, rec, c.src.Name(file), err)}
				b = nil
			}
		}
		if b == nil && skipped > 0 {
			b = &messages.Batch{}
		}
		if b != nil {
			b.Pass, b.Source, b.First, b.Count, b.Skipped = pass, uint32(file), first, rec-first, skipped
		} else {
			c.tokens <- struct{}{}
		}
		var e *messages.End
		if end {
			e = &messages.End{Pass: pass, Count: rec}
		}
		holding = false // the slot goes with the group, or came back above
		a.put(b, e, fail, poke)
		if end || fail != nil {
			return
		}
	}
}

// watchdog bounds the calls into one opened reader (opening it, which may
// read to reach a record, and the reads of each group): it gives the reader
// a context of its own and cancels it when a call outlasts the timeout.
type watchdog struct {
	ctx     context.Context
	cancel  context.CancelFunc
	timer   *time.Timer // armed during calls; nil when reads are unbounded
	timeout time.Duration
	fired   atomic.Bool // the timer cancelled ctx: the reader must be reopened
}

// open starts the context for a newly opened reader, ending the last one.
func (w *watchdog) open(parent context.Context, timeout time.Duration) context.Context {
	w.close()
	w.ctx, w.cancel = context.WithCancel(parent)
	w.timeout, w.timer = timeout, nil
	w.fired.Store(false)
	if timeout > 0 {
		cancel, fired := w.cancel, &w.fired
		w.timer = time.AfterFunc(timeout, func() {
			fired.Store(true)
			cancel()
		})
		w.timer.Stop()
	}
	return w.ctx
}

// arm starts the timer over a stretch of reads; disarm stops it.
func (w *watchdog) arm() {
	if w.timer != nil {
		w.timer.Reset(w.timeout)
	}
}

func (w *watchdog) disarm() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// tripped says whether a failed read failed because the timer cancelled the
// reader (and not because the reader is being stopped).
func (w *watchdog) tripped(parent context.Context) bool {
	return w.fired.Load() && parent.Err() == nil
}

// guard runs call under the timer. If the timer fired, the reader's
// context is cancelled: whatever call returned, the reader must be opened
// again, so guard returns ErrReadStalled.
func (w *watchdog) guard(parent context.Context, call func() error) error {
	if w.timer == nil {
		return call()
	}
	w.timer.Reset(w.timeout)
	err := call()
	if !w.timer.Stop() && parent.Err() == nil {
		return ErrReadStalled
	}
	return err
}

func (w *watchdog) close() {
	if w.cancel != nil {
		w.cancel()
		if w.timer != nil {
			w.timer.Stop()
		}
	}
}

// wait sleeps d unless ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// put hands a group (and the end or a failure) to the actor.
func (a *workerActor) put(b *messages.Batch, e *messages.End, f *readFailure, poke func()) {
	c := a.c
	c.mu.Lock()
	if b != nil {
		c.handoff = append(c.handoff, b)
		c.cursor = b.First + b.Count
	}
	if e != nil {
		c.ended = e
		c.cursor = e.Count
	}
	if f != nil {
		c.failed = f
	}
	c.mu.Unlock()
	poke()
}

const messagesTransient = messages.ErrorClass_ERROR_CLASS_TRANSIENT

// stackedReader is a reader that can decode records onto a tensor.Stack
// (readers.RecordFile).
type stackedReader interface {
	NextStacked(context.Context, *tensor.Stack) (tensor.Slots, error)
}

// skippable reports whether err is corruption the policy skips, and how many
// records it spans: one undecodable record, or a whole chunk whose checksum
// failed.
func skippable(err error, r readers.Reader, policy supervisor.CorruptPolicy) (int, bool) {
	if policy != supervisor.SkipCorrupt || !errors.Is(err, format.ErrCorrupt) {
		return 0, false
	}
	if s, ok := r.(interface{ SkipCorrupt() (int, bool) }); ok {
		return s.SkipCorrupt()
	}
	return 0, false
}

func offsetOf(err error) int64 {
	var fe *format.Error
	if errors.As(err, &fe) {
		return fe.Offset
	}
	return -1
}
