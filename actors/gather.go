package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unsafe"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/tensor"
)

// gatherSource is the record source of a global order (Shuffle.Global).
// The order's units are runs of positions of one virtual file
// (order.Order.Virtual), whose record g is the record at G position g of
// the pass's epoch: a reader of it gathers each record from the data set's
// files by position (readers.Positional), through the page cache. Readers
// of the files are pooled, so that a unit does not open every file again.
type gatherSource struct {
	files *fileSource
	plan  *protocol.Plan

	mu     sync.Mutex
	idle   map[int][]pooled // open readers no gather reader holds, by file
	pooled int
	closed bool
}

// pooled is an open reader of one of the data set's files, opened with a
// context of its own: a pooled reader outlives the gather reader that
// opened it, whose context ends with its run (or when its watchdog fires),
// so the file's reads must not end with that context; and a stalled read
// must be abandoned when the watchdog of the gather reader holding it
// fires, which a context of the opener's would not see.
type pooled struct {
	r      readers.Positional
	cancel context.CancelFunc // ends the reader's context
}

func (p pooled) close() {
	p.r.Close()
	p.cancel()
}

// held is a pooled reader a gather reader holds: its context ends when the
// holder's does (unlink undoes that link, false once it happened).
type held struct {
	pooled
	unlink func() bool
	epoch  uint64 // the epoch the reader reads (setEpoch)
}

// maxPooledReaders bounds the open readers a global order keeps idle:
// enough for every reader thread to find its files open on a data set of
// a few shards, few enough that thousands of shards do not hold as many
// open files and buffers.
const maxPooledReaders = 64

// gatherAhead is how many positions a gather reader reads at a time,
// sorted by file and offset.
const gatherAhead = 64

func newGatherSource(files *fileSource, plan *protocol.Plan) *gatherSource {
	return &gatherSource{files: files, plan: plan, idle: map[int][]pooled{}}
}

func (s *gatherSource) Rewindable() bool { return true }

func (s *gatherSource) Name(file int) string {
	if file == s.plan.Ord.Virtual() {
		return "the data set in its global order"
	}
	return s.files.Name(file)
}

// sampleKey is a WebDataset sample's key, for errors: a global order's
// ids name the data set's files, which the file source reads.
func (s *gatherSource) sampleKey(file, record int) string { return s.files.sampleKey(file, record) }

// Open opens the virtual file at G position from of pass's epoch; other
// files as the file source does.
func (s *gatherSource) Open(ctx context.Context, file int, pass uint32, from uint64) (readers.Reader, error) {
	if file != s.plan.Ord.Virtual() {
		return s.files.Open(ctx, file, pass, from)
	}
	e := uint64(s.plan.Epoch(pass))
	if n := s.plan.Ord.Len(); s.plan.Ord.Blended() != "" && (e+1)*n > messages.MaxRecords {
		return nil, fmt.Errorf("%w: epoch %d of a blend of %d samples an epoch: its files' sample ids would pass 2^40 (fewer epochs, or fewer samples an epoch)", ErrBadSpec, e, n)
	}
	ep := s.plan.Ord.Epoch(e)
	return &gatherReader{src: s, life: ctx, ep: ep, next: from, until: s.plan.Ord.Len(), held: map[int]held{}}, nil
}

// take is an open reader of file for epoch, an idle one or a new one,
// held under ctx: the reader's context ends when ctx does. A file whose
// records cannot be read by position fails, saying why.
func (s *gatherSource) take(ctx context.Context, file int, epoch uint64) (held, error) {
	if p, ok := s.idleReader(file); ok {
		setEpoch(p.r, s.plan.Ord.Seed(), epoch)
		return held{pooled: p, unlink: context.AfterFunc(ctx, p.cancel), epoch: epoch}, nil
	}
	// Linked before the open, which reads (an index, a header) and may
	// stall as any read does.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unlink := context.AfterFunc(ctx, cancel)
	r, err := s.files.Open(rctx, file, 0, 0)
	if err == nil {
		if err = addressable(r, s.files.Name(file)); err != nil {
			r.Close()
		}
	}
	if err != nil {
		unlink()
		cancel()
		return held{}, err
	}
	setEpoch(r, s.plan.Ord.Seed(), epoch)
	return held{pooled: pooled{r: r.(readers.Positional), cancel: cancel}, unlink: unlink, epoch: epoch}, nil
}

// idleReader takes an idle reader of file from the pool.
func (s *gatherSource) idleReader(file int) (pooled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.idle[file]
	if len(rs) == 0 {
		return pooled{}, false
	}
	p := rs[len(rs)-1]
	s.idle[file] = rs[:len(rs)-1]
	s.pooled--
	return p, true
}

// give puts h, open on file, back in the pool, or closes it: a reader
// whose holder's context ended (its run stopped, its watchdog fired) has
// its own context ended too, and is closed.
func (s *gatherSource) give(file int, h held) {
	if !h.unlink() {
		h.close()
		return
	}
	s.mu.Lock()
	if s.closed || s.pooled >= maxPooledReaders {
		s.mu.Unlock()
		h.close()
		return
	}
	s.idle[file] = append(s.idle[file], h.pooled)
	s.pooled++
	s.mu.Unlock()
}

// close closes the idle readers; the pool keeps none after it.
func (s *gatherSource) close() {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.pooled, s.closed = nil, 0, true
	s.mu.Unlock()
	for _, rs := range idle {
		for _, p := range rs {
			p.close()
		}
	}
}

// gatherReader reads the virtual file of one epoch from a G position on:
// gatherAhead positions at a time, their records read in file and offset
// order and handed out in G order.
type gatherReader struct {
	src *gatherSource
	// life is the context the gather reader was opened with, as every
	// reader's reads end with the context it was opened with: the readers
	// of the data set's files it holds end with it (gatherSource.take).
	life  context.Context
	ep    *order.Epoch
	next  uint64     // the G position Next returns next
	until uint64     // no position from until on is read (ReadUntil)
	ahead []gathered // positions next, next+1, ..., read
	held  map[int]held
	byPos []int // scratch: the positions of a fill, sorted by file and record
	// arena holds the records of a fill that readers read into memory of
	// the gather reader's (recordInto): reused by the next fill unless a
	// record in it was handed on as it is rather than copied onto a stack
	// (lent), so that a gather allocates nothing a record.
	arena []byte
	used  int
	lent  bool
}

// recordInto is a positional reader that reads a record into memory its
// caller owns (the IDX file's RecordInto).
type recordInto interface {
	RecordBytes() int
	RecordInto(ctx context.Context, n int, dst []byte) (tensor.Slots, error)
}

// gathered is one position read: its record, or why it could not be.
type gathered struct {
	file   int
	record uint64
	epoch  uint64 // the file's epoch the record is read in (a blend's files have their own)
	item   tensor.Slots
	err    error
}

// pop is the record at the next position, read ahead with the next
// gatherAhead when none is.
func (g *gatherReader) pop(ctx context.Context) (tensor.Slots, error) {
	if len(g.ahead) == 0 {
		if g.next >= g.until {
			return nil, io.EOF
		}
		g.fill(ctx)
	}
	r := &g.ahead[0]
	if r.err != nil {
		return nil, r.err // SkipCorrupt passes over it
	}
	item := r.item
	g.ahead = g.ahead[1:]
	g.next++
	return item, nil
}

// Next returns the record at the next position. It may be memory of the
// gather reader's, which is then not reused.
func (g *gatherReader) Next(ctx context.Context) (tensor.Slots, error) {
	g.lent = true
	return g.pop(ctx)
}

// NextStacked copies the next record onto st when it stacks: a group of
// records then travels as one tensor a slot.
func (g *gatherReader) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	item, err := g.pop(ctx)
	if err != nil || !st.Append(item) {
		g.lent = true
		return item, err
	}
	return nil, nil
}

// fill reads the records of the next gatherAhead positions (before
// until): sorted by file and record, so that the reads of one file go
// forward through it, and those of neighbouring records follow each other.
func (g *gatherReader) fill(ctx context.Context) {
	n := int(min(gatherAhead, g.until-g.next))
	g.ahead = slices.Grow(g.ahead[:0], n)[:n]
	g.byPos = g.byPos[:0]
	for i := range n {
		f, rec, e := g.ep.Source(g.next + uint64(i))
		g.ahead[i] = gathered{file: f, record: rec, epoch: e}
		g.byPos = append(g.byPos, i)
	}
	slices.SortFunc(g.byPos, func(a, b int) int {
		x, y := &g.ahead[a], &g.ahead[b]
		return cmp.Or(cmp.Compare(x.file, y.file), cmp.Compare(x.epoch, y.epoch), cmp.Compare(x.record, y.record))
	})
	if g.lent {
		g.arena, g.lent = nil, false
	}
	g.used = 0
	for _, i := range g.byPos {
		r := &g.ahead[i]
		r.item, r.err = g.read(ctx, r.file, r.record, r.epoch)
	}
}

// space is size bytes of the arena, aligned to 8, for a record of this
// fill: the arena grows when they do not fit (the records read into the
// old one keep it).
func (g *gatherReader) space(size int) []byte {
	size = (size + 7) &^ 7
	if g.used+size > len(g.arena) {
		words := make([]uint64, max(gatherAhead*size, 2*len(g.arena))/8)
		g.arena = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
		g.used = 0
	}
	b := g.arena[g.used : g.used+size]
	g.used += size
	return b
}

// read reads one record of a data set's file; a failed reader is closed,
// and the file opened afresh for its next record.
func (g *gatherReader) read(ctx context.Context, file int, record, epoch uint64) (tensor.Slots, error) {
	h, ok := g.held[file]
	if !ok {
		var err error
		if h, err = g.src.take(g.life, file, epoch); err != nil {
			return nil, &recordError{file: g.src.files.Name(file), record: record, err: err}
		}
		g.held[file] = h
	} else if h.epoch != epoch { // a blend's files are read in epochs of their own
		setEpoch(h.r, g.src.plan.Ord.Seed(), epoch)
		h.epoch = epoch
		g.held[file] = h
	}
	var item tensor.Slots
	var err error
	if ri, ok := h.r.(recordInto); ok {
		item, err = ri.RecordInto(ctx, int(record), g.space(ri.RecordBytes())[:ri.RecordBytes()])
	} else {
		item, err = h.r.RecordAt(ctx, int(record))
	}
	if err != nil {
		delete(g.held, file)
		h.unlink()
		h.close()
		return nil, &recordError{file: g.src.files.Name(file), record: record, err: err}
	}
	return item, nil
}

// recordError is a failure to read a record of one of the data set's
// files by position: what fails is that file's record, not the virtual
// file's (failedAt). Its message is the error's, which the stage's error
// prefixes with the file and record.
type recordError struct {
	file   string
	record uint64
	err    error
}

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

// failedAt names where err happened, in file's reading at record: the data
// set's file and record when a gather reader read it by position.
func failedAt(src recordSource, file int, record int64, err error) (string, int64) {
	if re, ok := errors.AsType[*recordError](err); ok {
		return re.file, int64(re.record)
	}
	return src.Name(file), record
}

// SkipCorrupt passes over the position whose record was corrupt.
func (g *gatherReader) SkipCorrupt() (records int, ok bool) {
	if len(g.ahead) == 0 || g.ahead[0].err == nil {
		return 0, false
	}
	g.ahead = g.ahead[1:]
	g.next++
	return 1, true
}

// ReadUntil says no position from n on is read (n <= 0: to the epoch's end).
func (g *gatherReader) ReadUntil(n int) {
	if n > 0 {
		g.until = min(uint64(n), g.src.plan.Ord.Len())
	}
}

func (g *gatherReader) Reset() error { return readers.ErrResetUnsupported }

// Close gives the open readers back to the pool.
func (g *gatherReader) Close() error {
	for f, r := range g.held {
		g.src.give(f, r)
	}
	clear(g.held)
	g.ahead = nil
	return nil
}
