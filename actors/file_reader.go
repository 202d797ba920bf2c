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

	"github.com/actorfeed/actorfeed/internal/pause"
	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// recordSource opens the readers a file-reader actor reads: one per file of the
// pipeline's list and pass. Open returns a reader positioned at record from
// (Rewindable sources) or continuing where the last one stopped (others,
// such as a feed queue, which cannot be read twice).
type recordSource interface {
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
	src    recordSource
	slots  []readers.SlotSpec // declared record slots, checked when set
	group  int
	policy supervisor.CorruptPolicy
	retry  supervisor.Backoff

	coord  *actor.PID
	file   int    // assigned file, -1 when idle
	to     uint64 // the assignment ends before this record; 0 at the file's end
	pass   uint32 // of the assignment
	cursor uint64 // records read so far into handoff or outlet
	out    protocol.Outlet
	tokens chan struct{} // free read-ahead slots: window minus groups held
	freed  uint64        // out.base up to which slots were given back

	mu      sync.Mutex
	handoff []*messages.Batch // read by the goroutine, not yet in out
	ended   *messages.End     // the goroutine reached the end of the file
	failed  *readFailure      // the goroutine failed
	kept    keptReader        // left open by the last run for the next
	stopped bool              // the actor stopped: nothing is kept any more
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

func newWorkerCell(pipe *shared, name string, src recordSource, window int) *workerCell {
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
	defer func() { c.meter.gauge(c.out.Held(), 0) }()
	msg, box := c.receive(ctx)
	defer c.post()
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			c.announce(box)
		}
		return
	case *actor.Stopping:
		// The pipeline is closing: a reader blocked in Options.Open (user
		// code) or in the kernel must not hang Close.
		if !a.read.stopWithin(c.pipe.opts.StopGrace) {
			c.pipe.abandon(fmt.Sprintf("stage %s's read", c.name))
		}
		c.dropKept(true)
		return
	case *actor.Restarting:
		a.stop()
		c.dropKept(false)
		return
	case *crashed:
		panic(m.reason)
	case *messages.Assign:
		c.coord = ctx.Sender()
		a.assign(ctx, m)
	case *messages.Demand:
		if err := c.out.OnDemand(m); err != nil {
			a.failWith(-1, err)
		}
	case *messages.Cancel:
		if m.Epoch == c.out.Epoch {
			a.stop()
			a.reset(-1, 0)
			return
		}
	case *poke:
	default:
		return
	}
	a.drain()
	c.out.Flush(box)
	a.release()
}

// assign takes a (re)assignment: the same file and pass resumes, replaying
// what the coordinator has not taken in; anything else starts over at from.
func (a *workerActor) assign(ctx actor.Context, m *messages.Assign) {
	c := a.c
	a.stop()
	a.drain()
	from, resume := uint64(0), false
	same := int(m.File) == c.file && m.Pass == c.pass && m.To == c.to
	if same {
		from, resume = c.seqOfRecord(m.From)
	}
	if !resume {
		if !c.src.Rewindable() && same {
			a.failWith(-1, fmt.Errorf("%w: assignment from record %d, which was not kept for replay", ErrProtocol, m.From))
			return
		}
		a.reset(int(m.File), m.Pass)
		c.cursor, c.to = m.From, m.To
	}
	if err := c.out.Subscribe(ctx.Sender(), &messages.Subscribe{Epoch: m.Epoch, Pass: m.Pass, From: from}); err != nil {
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
	for i, b := range c.out.Items {
		if b.First == rec {
			return c.out.Base + uint64(i), true
		}
	}
	if rec == c.cursor {
		return c.out.Produced(), true
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
	n += c.out.Held()
	c.out.Reset(pass)
	c.freed = 0
	a.giveBack(n)
	c.file, c.pass, c.cursor, c.to = file, pass, 0, 0
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
		c.out.Push(b)
	}
	c.meter.items.Add(int64(len(c.handoff)))
	c.handoff = c.handoff[:0]
	if c.failed != nil && c.out.Fail == nil {
		file, record := failedAt(c.src, c.file, c.failed.record, c.failed.err)
		c.out.Fail = protocol.Failure(c.name, file, c.failed.offset, c.failed.err)
		c.pipe.record(c.name, &StageError{Stage: c.name, File: file, Offset: c.failed.offset,
			Record: record, Class: Classify(c.failed.err), Err: c.failed.err})
	}
	if c.ended != nil && c.out.End == nil {
		c.out.End = &messages.End{Pass: c.pass, Count: c.ended.Count, Skipped: c.ended.Skipped}
	}
}

// release gives back the slots of groups the coordinator acknowledged
// (the outlet forgot them).
func (a *workerActor) release() {
	c := a.c
	if c.out.Base > c.freed {
		a.giveBack(int(c.out.Base - c.freed))
	}
	c.freed = c.out.Base
}

func (a *workerActor) failWith(offset int64, err error) {
	c := a.c
	c.mu.Lock()
	c.failed = &readFailure{offset: offset, record: -1, err: err}
	c.mu.Unlock()
}

func (a *workerActor) start(ctx actor.Context) {
	c := a.c
	file, pass, from, to := c.file, c.pass, c.cursor, c.to
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.read.start(ctx, context.Background(), func(rctx context.Context) {
		a.readFile(rctx, file, pass, from, to, func() { root.Send(self, &poke{}) })
	})
}

// stop cancels the reading goroutine and waits for it.
func (a *workerActor) stop() { a.read.stop() }

// readFile is the goroutine: it reads the file in groups, one read-ahead
// slot per group, into the handoff.
func (a *workerActor) readFile(ctx context.Context, file int, pass uint32, from, to uint64, poke func()) {
	c := a.c
	fr := &fileRead{c: c, ctx: ctx, file: file, pass: pass, from: from, rec: from, to: to, w: &watchdog{}, stuckAt: math.MaxUint64}
	defer fr.close()
	if err := supervisor.Retry(ctx, c.retry, func(int) error { return fr.open() }); err != nil {
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
	st := tensor.NewStack(c.group)
	st.SetMaxBytes(c.pipe.opts.GroupBytes)
	fr.stackOnto(st)
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
		g := fr.readGroup()
		if g.stopped {
			// Stopped (a reassignment, a stop): the group is dropped and
			// its slot given back.
			c.tokens <- struct{}{}
			return
		}
		b, fail := fr.message(g)
		if b == nil {
			c.tokens <- struct{}{} // nothing to deliver: the slot comes back
		}
		var e *messages.End
		if g.end {
			e = &messages.End{Pass: pass, Count: fr.rec}
		}
		holding = false // the slot goes with the group, or came back above
		if fr.clean = g.end && fail == nil; fr.clean {
			// Kept before the End goes: the coordinator may assign this
			// worker the file's next run as soon as the End is in, and
			// that run must find the reader to reuse it.
			fr.close()
			fr.r, fr.w = nil, nil
		}
		a.put(b, e, fail, poke)
		if g.end || fail != nil {
			return
		}
	}
}

// fileRead is one run of a file reader's goroutine over a file: the reader
// it opened (with a context of its own, which the watchdog cancels when a
// read stalls), the record it stands at, and the stack it decodes records
// onto.
type fileRead struct {
	c       *workerCell
	ctx     context.Context
	file    int
	pass    uint32
	from    uint64 // where the reader was (re)opened
	rec     uint64 // the next record
	to      uint64 // the record to stop before; 0 reads to the end
	r       readers.Reader
	w       *watchdog
	st      *tensor.Stack
	stuckAt uint64 // the record transient failures happen at
	tries   int    // the failures there
	// skipped counts the records of corrupt chunks skipped while opening,
	// not yet reported in a group.
	skipped uint64
	clean   bool // the run read its assignment to the end, without a failure
}

// close closes the reader, or keeps it for the worker's next run when this
// one read its assignment to the end. The reader is closed before the
// watchdog ends its context: a gather reader gives the readers it holds
// back to their pool only while its context lives (gatherSource.give).
func (fr *fileRead) close() {
	if fr.r != nil && fr.clean && fr.c.keep(fr.file, fr.r, fr.w) {
		return
	}
	if fr.r != nil {
		fr.r.Close()
	}
	if fr.w != nil {
		fr.w.close()
	}
}

// open opens the file at fr.from under the watchdog; a stalled open is a
// transient error. Under the skip policy, a record in a corrupt chunk
// cannot be sought to (the chunk fails its checksum): the rest of the
// chunk is skipped and the file opened after it. With nothing left to read
// in the assignment, fr.r stays nil.
func (fr *fileRead) open() error {
	for {
		err := fr.openAt()
		if err == nil {
			fr.bound()
			return nil
		}
		if fr.c.policy != supervisor.SkipCorrupt || !errors.Is(err, format.ErrCorrupt) {
			return err
		}
		cs, ok := fr.c.src.(interface {
			chunkAt(file int, rec uint64) (first, end uint64, ok bool)
		})
		if !ok {
			return err
		}
		first, end, ok := cs.chunkAt(fr.file, fr.from)
		if !ok || end <= fr.from {
			return err
		}
		fr.c.pipe.corrupt.noteSkip(fr.c.src.Name(fr.file), err, int(end-first))
		if fr.to > 0 {
			end = min(end, fr.to)
		}
		fr.skipped += end - fr.from
		fr.from, fr.rec = end, end
		if fr.to > 0 && end >= fr.to {
			return nil
		}
	}
}

// bound tells the reader where the run's assignment ends, when it can use
// that: an object's read-ahead then fetches nothing past it.
func (fr *fileRead) bound() {
	if b, ok := fr.r.(interface{ ReadUntil(record int) }); ok {
		b.ReadUntil(int(fr.to))
	}
}

// openAt opens the file at fr.from under the watchdog, or moves the
// reader the worker kept open on the file there.
func (fr *fileRead) openAt() error {
	c := fr.c
	if fr.reuse() {
		return nil
	}
	timeout := c.pipe.opts.ReadTimeout
	if !c.src.Rewindable() {
		// A feed queue's reader waits for its producer, who may pause
		// for as long as it likes: that is no stalled read.
		timeout = 0
	}
	readCtx := fr.w.open(fr.ctx, timeout)
	err := fr.w.guard(fr.ctx, func() (err error) {
		fr.r, err = c.src.Open(readCtx, fr.file, fr.pass, fr.from)
		return err
	})
	if errors.Is(err, ErrReadStalled) {
		if fr.r != nil {
			fr.r.Close()
			fr.r = nil
		}
		err = &stalled{file: c.src.Name(fr.file), record: fr.from, after: c.pipe.opts.ReadTimeout}
	}
	return err
}

// stackOnto decodes records that stack (one dense instance each, alike in
// shape) straight into st's blocks, recycled through the pipeline's block
// pool when it has one; others travel as parts of their own.
func (fr *fileRead) stackOnto(st *tensor.Stack) {
	if blocks := fr.c.pipe.blocks; blocks != nil {
		st.SetAlloc(blocks.alloc)
	}
	fr.st = st
}

// take is the group stacked so far, registered for recycling.
func (fr *fileRead) take() tensor.Slots {
	s, block := fr.st.TakeBlock()
	if blocks := fr.c.pipe.blocks; s != nil && blocks != nil {
		rows, _ := s.Instances()
		blocks.register(block, rows)
	}
	return s
}

// next reads a record, onto the stack when the reader can: stacked reports
// that it went there.
func (fr *fileRead) next() (item tensor.Slots, stacked bool, err error) {
	if sr, ok := fr.r.(stackedReader); ok {
		item, err := sr.NextStacked(fr.w.ctx, fr.st)
		return item, err == nil && item == nil, err
	}
	item, err = fr.r.Next(fr.w.ctx)
	return item, false, err
}

// group is what one read-ahead slot's worth of reading gave.
type group struct {
	first, skipped uint64
	parts          []tensor.Slots
	ids            []uint64
	end            bool         // the file ended
	fail           *readFailure // the reading failed
	stopped        bool         // the goroutine was stopped: nothing to deliver
}

// readGroup reads up to a group of records: GroupSize, or as many as fill
// a block of GroupBytes. The watchdog runs over the group's reads (one timer reset per group, not per record).
func (fr *fileRead) readGroup() group {
	c := fr.c
	g := group{first: fr.rec - fr.skipped, skipped: fr.skipped, ids: make([]uint64, 0, c.group)}
	fr.skipped = 0
	fr.w.arm()
	defer fr.w.disarm()
	for len(g.ids) < c.group && !fr.st.Full() {
		if fr.r == nil || fr.to > 0 && fr.rec >= fr.to {
			g.end = true
			break
		}
		item, stacked, err := fr.next()
		if err != nil && fr.w.tripped(fr.ctx) {
			err = &stalled{file: c.src.Name(fr.file), record: fr.rec, after: c.pipe.opts.ReadTimeout}
		}
		if err == nil {
			err = fr.check(item, stacked)
		}
		if err == nil {
			if !stacked {
				if s := fr.take(); s != nil {
					g.parts = append(g.parts, s)
				}
				g.parts = append(g.parts, item)
			}
			g.ids = append(g.ids, messages.SampleID(fr.file, int(fr.rec)))
			fr.rec++
			continue
		}
		if errors.Is(err, io.EOF) {
			g.end = true
			break
		}
		if fr.ctx.Err() != nil {
			return fr.stop(g)
		}
		if n, ok := skippable(err, fr.r, c.policy); ok {
			file, _ := failedAt(c.src, fr.file, int64(fr.rec), err)
			c.pipe.corrupt.noteSkip(file, err, n)
			if fr.to > 0 { // the rest of a chunk may lie past the assignment
				n = int(min(uint64(n), fr.to-fr.rec))
			}
			g.skipped += uint64(n)
			fr.rec += uint64(n)
			continue
		}
		if c.policy == supervisor.SkipCorrupt && errors.Is(err, format.ErrFraming) {
			fr.lostTail(&g, err)
			break
		}
		if err = fr.recover(err); err == nil {
			continue // reopened at the record: go on
		}
		if fr.ctx.Err() != nil {
			// Stopped while reopening (a reassignment): the read did not
			// fail, it was abandoned.
			return fr.stop(g)
		}
		g.fail = &readFailure{offset: offsetOf(err), record: int64(fr.rec), err: err}
		break
	}
	if s := fr.take(); s != nil {
		g.parts = append(g.parts, s)
	}
	return g
}

// lostTail ends the file at damage to its framing met under the skip
// policy (after the file was indexed, or read without an index): where
// its next record starts cannot be found, so the rest of the assignment
// is skipped, and the damage listed with its records unknown.
func (fr *fileRead) lostTail(g *group, err error) {
	file, _ := failedAt(fr.c.src, fr.file, int64(fr.rec), err)
	fr.c.pipe.corrupt.note(CorruptChunk{File: file, Offset: offsetOf(err), Records: -1, Err: err})
	if fr.to > fr.rec {
		g.skipped += fr.to - fr.rec
		fr.rec = fr.to
	}
	g.end = true
}

// stop ends the group the goroutine was stopped in (a restart, a
// reassignment). A rewindable source reads the group's records again
// wherever the stage goes on, so the group is dropped. A feed queue
// cannot be read twice: the records it popped into the group are handed
// off as a shorter group, kept in the outlet until the coordinator has
// them like any other, or a restart mid-group would lose them.
func (fr *fileRead) stop(g group) group {
	if fr.c.src.Rewindable() || len(g.ids) == 0 {
		g.stopped = true
		return g
	}
	if s := fr.take(); s != nil {
		g.parts = append(g.parts, s)
	}
	return g
}

// check checks a record against the declared slots. Stacked records all
// have the first one's dtypes and shapes: checking the first of a group
// checks them all.
func (fr *fileRead) check(item tensor.Slots, stacked bool) error {
	c := fr.c
	if c.slots == nil || (stacked && fr.st.Len() != 1) {
		return nil
	}
	var err error
	if stacked {
		item, err = fr.st.Row(0)
	}
	if err == nil {
		err = readers.CheckSlots(c.slots, item)
	}
	if err != nil {
		if stacked {
			fr.st.Drop()
		}
		return fmt.Errorf("actors: record %d of %s: %w", fr.rec, c.src.Name(fr.file), err)
	}
	return nil
}

// recover gets past a transient error by reopening the file at the record
// that failed, on the reader's own backoff timers, and returns nil when it
// did. The attempts count per record: a record that keeps failing ends the
// file after Retry.Attempts. Any other error is returned as it is.
func (fr *fileRead) recover(err error) error {
	c := fr.c
	if supervisor.Classify(err) != messagesTransient {
		return err
	}
	if fr.rec != fr.stuckAt {
		fr.stuckAt, fr.tries = fr.rec, 0
	}
	if fr.tries++; fr.tries >= max(c.retry.Attempts, 1) {
		return fmt.Errorf("%w after %d attempts at record %d: %w", supervisor.ErrRetriesExhausted, fr.tries, fr.rec, err)
	}
	if werr := pause.Sleep(fr.ctx, c.retry.Delay(fr.tries-1, nil)); werr != nil {
		return werr
	}
	fr.r.Close()
	fr.r = nil
	fr.from = fr.rec
	if rerr := supervisor.Retry(fr.ctx, c.retry, func(int) error { return fr.open() }); rerr != nil {
		return rerr
	}
	fr.w.arm() // the reopened reader's watchdog, over the rest of the group
	return nil
}

// message makes the group's message. A group reports every record it used
// up, skipped ones included, even when none is left to deliver: the
// coordinator counts a file done only once its records are all accounted
// for. It is nil when there is nothing to send.
func (fr *fileRead) message(g group) (*messages.Batch, *readFailure) {
	fail := g.fail
	var b *messages.Batch
	if len(g.parts) > 0 {
		var err error
		if b, err = messages.FromParts(g.parts, g.ids); err != nil {
			fail = &readFailure{offset: -1, record: int64(g.first), err: fmt.Errorf("actors: records %d..%d of %s: %w", g.first, fr.rec, fr.c.src.Name(fr.file), err)}
			b = nil
		}
	}
	if b == nil && g.skipped > 0 {
		b = &messages.Batch{}
	}
	if b != nil {
		b.Pass, b.Source, b.First, b.Count, b.Skipped = fr.pass, uint32(fr.file), g.first, fr.rec-g.first, g.skipped
	}
	return b, fail
}

// watchdog bounds the calls into one opened reader (opening it, which may
// read to reach a record, and the reads of each group): it gives the reader
// a context of its own and cancels it when a call outlasts the timeout.
type watchdog struct {
	ctx     context.Context
	cancel  context.CancelFunc
	unlink  func() bool // stops parent's end from cancelling ctx (context.AfterFunc)
	timer   *time.Timer // armed during calls; nil when reads are unbounded
	timeout time.Duration
	fired   atomic.Bool // the timer cancelled ctx: the reader must be reopened
}

// open starts the context for a newly opened reader, ending the last one.
// The context ends with parent (the run's), or when the timer fires; a
// reader kept for the next run is detached from its run (keptReader).
func (w *watchdog) open(parent context.Context, timeout time.Duration) context.Context {
	w.close()
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(parent))
	w.attach(parent)
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

// attach ends the reader's context when parent ends: the run using it
// was stopped.
func (w *watchdog) attach(parent context.Context) { w.unlink = context.AfterFunc(parent, w.cancel) }

// detach keeps the reader's context alive after its run, false when the
// run was stopped or the timer fired (the context ended).
func (w *watchdog) detach() bool {
	w.disarm()
	return w.unlink() && w.ctx.Err() == nil
}

func (w *watchdog) close() {
	if w.cancel != nil {
		w.unlink()
		w.cancel()
		if w.timer != nil {
			w.timer.Stop()
		}
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
