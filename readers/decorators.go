package readers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/tensor"
)

// decorated holds the one source of a single-source decorator and
// implements its Close.
type decorated struct {
	src    Reader
	closed bool
}

func (d *decorated) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	return d.src.Close()
}

func (d *decorated) check() error {
	if d.closed {
		return ErrClosed
	}
	return nil
}

// ---- shuffle ----

type shuffle struct {
	decorated
	window int
	seed   uint64
	pass   uint64
	rng    *rand.Rand
	buf    []tensor.Slots
	pos    int // next item of buf to hand out once the window is full
	ready  bool
	eof    bool
}

// Shuffle returns a reader that fills a window of items from r, shuffles it
// and hands it out before filling the next; windows never mix. A window of 0
// or 1 keeps the order. Pass p (counted by Reset, from 0) shuffles with a
// PCG generator seeded (seed, p), so any pass can be replayed with
// ShuffleFromPass. Panics if window < 0.
func Shuffle(r Reader, window int, seed uint64) Reader {
	return ShuffleFromPass(r, window, seed, 0)
}

// ShuffleFromPass is Shuffle with the pass counter starting at pass.
func ShuffleFromPass(r Reader, window int, seed uint64, pass int) Reader {
	if window < 0 || pass < 0 {
		panic(fmt.Sprintf("readers: Shuffle window %d and pass %d must not be negative", window, pass))
	}
	s := &shuffle{decorated: decorated{src: source(r)}, window: window, seed: seed, pass: uint64(pass)}
	s.rng = rand.New(rand.NewPCG(seed, s.pass))
	return s
}

func (s *shuffle) Next(ctx context.Context) (tensor.Slots, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.window <= 1 {
		return s.src.Next(ctx)
	}
	if s.ready && s.pos < len(s.buf) {
		s.pos++
		item := s.buf[s.pos-1]
		s.buf[s.pos-1] = nil
		return item, nil
	}
	if s.ready { // window used up: start the next one
		s.buf, s.pos, s.ready = s.buf[:0], 0, false
	}
	// Fill the window. On an error the items read so far stay in buf, so a
	// retry after a transient failure loses nothing.
	for !s.eof && len(s.buf) < s.window {
		item, err := s.src.Next(ctx)
		if errors.Is(err, io.EOF) {
			s.eof = true
			break
		}
		if err != nil {
			return nil, err
		}
		s.buf = append(s.buf, item)
	}
	if len(s.buf) == 0 {
		return nil, io.EOF
	}
	s.rng.Shuffle(len(s.buf), func(i, j int) { s.buf[i], s.buf[j] = s.buf[j], s.buf[i] })
	s.ready, s.pos = true, 1
	item := s.buf[0]
	s.buf[0] = nil
	return item, nil
}

func (s *shuffle) Reset() error {
	if err := s.check(); err != nil {
		return err
	}
	s.pass++
	s.rng = rand.New(rand.NewPCG(s.seed, s.pass))
	clear(s.buf)
	s.buf, s.pos, s.ready, s.eof = s.buf[:0], 0, false, false
	return s.src.Reset()
}

// ---- batch ----

type batch struct {
	decorated
	size     int
	dropLast bool
	pending  []tensor.Slots
	eof      bool
}

// Batch returns a reader that concatenates size instances of r into one
// batch with tensor.Concat. The last, shorter batch is kept unless dropLast.
// Panics if size < 1.
func Batch(r Reader, size int, dropLast bool) Reader {
	if size < 1 {
		panic(fmt.Sprintf("readers: Batch size %d must be at least 1", size))
	}
	return &batch{decorated: decorated{src: source(r)}, size: size, dropLast: dropLast}
}

func (b *batch) Next(ctx context.Context) (tensor.Slots, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	for !b.eof && len(b.pending) < b.size {
		item, err := b.src.Next(ctx)
		if errors.Is(err, io.EOF) {
			b.eof = true
			break
		}
		if err != nil {
			return nil, err // pending instances are kept for a retry
		}
		b.pending = append(b.pending, item)
	}
	if len(b.pending) == 0 || (b.eof && b.dropLast && len(b.pending) < b.size) {
		clear(b.pending)
		b.pending = b.pending[:0]
		return nil, io.EOF
	}
	out, err := tensor.Concat(b.pending)
	clear(b.pending)
	b.pending = b.pending[:0]
	if err != nil {
		return nil, fmt.Errorf("readers: batch: %w", err)
	}
	return out, nil
}

func (b *batch) Reset() error {
	if err := b.check(); err != nil {
		return err
	}
	clear(b.pending)
	b.pending, b.eof = b.pending[:0], false
	return b.src.Reset()
}

// ---- multi-pass ----

type multiPass struct {
	decorated
	passes, pass int
}

// MultiPass returns a reader that serves passes passes over r: at each end
// of r it resets r and goes on, until the last pass ends. Panics if
// passes < 1.
func MultiPass(r Reader, passes int) Reader {
	if passes < 1 {
		panic(fmt.Sprintf("readers: MultiPass passes %d must be at least 1", passes))
	}
	return &multiPass{decorated: decorated{src: source(r)}, passes: passes}
}

func (m *multiPass) Next(ctx context.Context) (tensor.Slots, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	for m.pass < m.passes {
		item, err := m.src.Next(ctx)
		if !errors.Is(err, io.EOF) {
			return item, err
		}
		m.pass++
		if m.pass < m.passes {
			if err := m.src.Reset(); err != nil {
				return nil, fmt.Errorf("readers: multi-pass: starting pass %d: %w", m.pass, err)
			}
		}
	}
	return nil, io.EOF
}

func (m *multiPass) Reset() error {
	if err := m.check(); err != nil {
		return err
	}
	m.pass = 0
	return m.src.Reset()
}

// ---- map ----

type mapped struct {
	decorated
	fn func(tensor.Slots) (tensor.Slots, error)
}

// Map returns a reader that applies fn to every item of r. An error from fn
// is returned by Next.
func Map(r Reader, fn func(tensor.Slots) (tensor.Slots, error)) Reader {
	return &mapped{decorated: decorated{src: source(r)}, fn: fn}
}

func (m *mapped) Next(ctx context.Context) (tensor.Slots, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	item, err := m.src.Next(ctx)
	if err != nil {
		return nil, err
	}
	return m.fn(item)
}

func (m *mapped) Reset() error {
	if err := m.check(); err != nil {
		return err
	}
	return m.src.Reset()
}

// ---- firstn ----

type firstN struct {
	decorated
	n, taken int
}

// FirstN returns a reader that yields the first n items of r and then
// io.EOF. It pulls exactly n items from r, never n+1. Panics if n < 0.
func FirstN(r Reader, n int) Reader {
	if n < 0 {
		panic(fmt.Sprintf("readers: FirstN n %d must not be negative", n))
	}
	return &firstN{decorated: decorated{src: source(r)}, n: n}
}

func (f *firstN) Next(ctx context.Context) (tensor.Slots, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.taken >= f.n {
		return nil, io.EOF
	}
	item, err := f.src.Next(ctx)
	if err == nil {
		f.taken++
	}
	return item, err
}

func (f *firstN) Reset() error {
	if err := f.check(); err != nil {
		return err
	}
	f.taken = 0
	return f.src.Reset()
}

// ---- cache ----

type cached struct {
	decorated
	items    []tensor.Slots
	complete bool // items hold one whole pass
	replay   bool
	pos      int
}

// Cache returns a reader that records the items of r during the first pass
// that runs to its end, and serves every later pass from memory without
// touching r. Nothing is read ahead: a pass reset before its end is
// discarded and recorded again. Cached items are shared between passes, so
// consumers must not modify them. Memory grows with the data set: cache only
// what fits.
func Cache(r Reader) Reader { return &cached{decorated: decorated{src: source(r)}} }

func (c *cached) Next(ctx context.Context) (tensor.Slots, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.replay {
		if c.pos >= len(c.items) {
			return nil, io.EOF
		}
		c.pos++
		return c.items[c.pos-1], nil
	}
	item, err := c.src.Next(ctx)
	if errors.Is(err, io.EOF) {
		c.complete = true
	} else if err == nil && !c.complete {
		c.items = append(c.items, item)
	}
	return item, err
}

func (c *cached) Reset() error {
	if err := c.check(); err != nil {
		return err
	}
	if c.complete {
		c.replay, c.pos = true, 0
		return nil
	}
	c.items = nil
	return c.src.Reset()
}

// ---- multi-source decorators ----

type multi struct {
	srcs   []Reader
	closed bool
}

func (m *multi) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, r := range m.srcs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

func (m *multi) resetAll() error {
	if m.closed {
		return ErrClosed
	}
	var errs []error
	for _, r := range m.srcs {
		errs = append(errs, r.Reset())
	}
	return errors.Join(errs...)
}

type compose struct {
	multi
	count int // aligned items served
}

// Compose returns a reader that reads one item from each reader and joins
// their slots in order into one item. All readers must end together: if some
// end while others still yield, Next returns ErrUnaligned, after exactly the
// aligned prefix. End of data is io.EOF, never a zero value, so a legitimate
// empty or zero item cannot be mistaken for an end.
func Compose(rs ...Reader) Reader { return &compose{multi: multi{srcs: sources(rs)}} }

func (c *compose) Next(ctx context.Context) (tensor.Slots, error) {
	if c.closed {
		return nil, ErrClosed
	}
	var out tensor.Slots
	var ended []int
	for i, r := range c.srcs {
		item, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			ended = append(ended, i)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("readers: compose: reader %d: %w", i, err)
		}
		out = append(out, item...)
	}
	switch {
	case len(ended) == len(c.srcs):
		return nil, io.EOF
	case len(ended) > 0:
		return nil, fmt.Errorf("%w: reader %d ended after %d items while others go on", ErrUnaligned, ended[0], c.count)
	}
	c.count++
	return out, nil
}

func (c *compose) Reset() error {
	c.count = 0
	return c.resetAll()
}

type chain struct {
	multi
	cur int
}

// Chain returns a reader that yields every item of the first reader, then of
// the second, and so on.
func Chain(rs ...Reader) Reader { return &chain{multi: multi{srcs: sources(rs)}} }

func (c *chain) Next(ctx context.Context) (tensor.Slots, error) {
	if c.closed {
		return nil, ErrClosed
	}
	for c.cur < len(c.srcs) {
		item, err := c.srcs[c.cur].Next(ctx)
		if !errors.Is(err, io.EOF) {
			return item, err
		}
		c.cur++
	}
	return nil, io.EOF
}

func (c *chain) Reset() error {
	c.cur = 0
	return c.resetAll()
}
