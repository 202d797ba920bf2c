package readers

import (
	"context"
	"fmt"
	"sync"

	"github.com/actorfeed/actorfeed/tensor"
)

// result is one outcome of a source read or a mapped item.
type result struct {
	idx  int
	item tensor.Slots
	err  error
	end  bool // the source's end (io.EOF or its error), not an item
}

// concurrent is what the goroutine-running decorators share: a source, the
// goroutines of the current pass (started lazily by the first Next,
// cancelled and joined by stop), and the end that stopped the pass, which
// later calls return again.
type concurrent struct {
	decorated
	cancel context.CancelFunc
	wg     sync.WaitGroup
	end    error // io.EOF or the error that ended the pass, once delivered
}

// begin is the common head of Next: it reports an error to return at once
// (closed, or the end already delivered) and starts the pass if needed.
func (c *concurrent) begin(start func() []func(context.Context)) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.end != nil {
		return c.end
	}
	if c.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		for _, f := range start() {
			c.wg.Go(func() { f(ctx) })
		}
	}
	return nil
}

// finish records the error a delivered result carries as the pass's end
// and stops the goroutines.
func (c *concurrent) finish(err error) {
	if err != nil {
		c.end = err
		c.stop()
	}
}

// stop cancels the goroutines and waits for them. It returns promptly as
// long as the source's Next honours its context.
func (c *concurrent) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	c.cancel = nil
}

func (c *concurrent) Reset() error {
	if err := c.check(); err != nil {
		return err
	}
	c.stop()
	c.end = nil
	return c.src.Reset()
}

func (c *concurrent) Close() error {
	c.stop()
	return c.decorated.Close()
}

// ---- buffered ----

type buffered struct {
	concurrent
	size int
	ch   chan result
}

// Buffered returns a reader that prefetches up to size items of r on a
// goroutine (the Python decorator paddle.reader.buffered). The goroutine
// starts on the first Next and is stopped and joined by Reset and Close. An
// error from r reaches Next after the items read before it, and is returned
// again by later calls. Panics if size < 1.
func Buffered(r Reader, size int) Reader {
	if size < 1 {
		panic(fmt.Sprintf("readers: Buffered size %d must be at least 1", size))
	}
	return &buffered{concurrent: concurrent{decorated: decorated{src: source(r)}}, size: size}
}

func (b *buffered) fill(ctx context.Context) {
	for {
		item, err := b.src.Next(ctx)
		if err != nil && ctx.Err() != nil {
			return // stopped: the error is ours, not the source's
		}
		select {
		case b.ch <- result{item: item, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *buffered) Next(ctx context.Context) (tensor.Slots, error) {
	err := b.begin(func() []func(context.Context) {
		// The channel holds size-1 items; the goroutine holds one more while
		// it waits to send, so size items are prefetched in all.
		b.ch = make(chan result, b.size-1)
		return []func(context.Context){b.fill}
	})
	if err != nil {
		return nil, err
	}
	select {
	case r := <-b.ch:
		b.finish(r.err) // on an error the goroutine has returned or is about to
		return r.item, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ---- xmap ----

type xmap struct {
	concurrent
	fn        func(tensor.Slots) (tensor.Slots, error)
	workers   int
	buffer    int
	ordered   bool
	tokens    chan struct{} // one per item between source read and delivery
	results   chan result
	pending   map[int]result // ordered: results waiting for their turn
	delivered int            // items handed out this pass
	final     *result        // the source's end (EOF or error), held back
}

// XMap returns a reader that applies fn to the items of r on workers
// goroutines (paddle.reader.xmap_readers). With ordered, items come out in
// the order of r; otherwise as they finish. At most workers+buffer items are
// between the source and the consumer at any time. An error from r or from
// fn reaches Next after every item read before it (ordered) or as soon as it
// is known (unordered, fn errors), and is returned again by later calls;
// goroutines are stopped and joined by Reset and Close. fn runs on several
// goroutines at once and must be safe for that. Panics if workers or
// buffer < 1.
func XMap(r Reader, fn func(tensor.Slots) (tensor.Slots, error), workers, buffer int, ordered bool) Reader {
	if workers < 1 || buffer < 1 {
		panic(fmt.Sprintf("readers: XMap workers %d and buffer %d must be at least 1", workers, buffer))
	}
	return &xmap{concurrent: concurrent{decorated: decorated{src: source(r)}}, fn: fn, workers: workers, buffer: buffer, ordered: ordered}
}

// startPass makes the channels of a pass and returns its goroutines: the
// feeder and the workers.
func (x *xmap) startPass() []func(context.Context) {
	limit := x.workers + x.buffer
	x.tokens = make(chan struct{}, limit)
	// Every result holds a token, so results can always be sent without
	// blocking: workers never wait on the consumer.
	x.results = make(chan result, limit)
	jobs := make(chan result, x.buffer)
	x.pending = map[int]result{}
	x.delivered, x.final = 0, nil
	run := []func(context.Context){func(ctx context.Context) { x.feed(ctx, jobs) }}
	for range x.workers {
		run = append(run, func(ctx context.Context) {
			for j := range jobs {
				item, err := x.fn(j.item)
				x.results <- result{idx: j.idx, item: item, err: err}
			}
		})
	}
	return run
}

func (x *xmap) feed(ctx context.Context, jobs chan<- result) {
	defer close(jobs)
	for i := 0; ; i++ {
		select {
		case x.tokens <- struct{}{}:
		case <-ctx.Done():
			return
		}
		item, err := x.src.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				x.results <- result{idx: i, err: err, end: true}
			}
			return
		}
		select {
		case jobs <- result{idx: i, item: item}:
		case <-ctx.Done():
			return
		}
	}
}

func (x *xmap) Next(ctx context.Context) (tensor.Slots, error) {
	if err := x.begin(x.startPass); err != nil {
		return nil, err
	}
	for {
		if r, ok := x.ready(); ok {
			return x.deliver(r)
		}
		select {
		case r := <-x.results:
			if r.end { // held back until every item before it is out
				x.final = &r
				continue
			}
			if !x.ordered {
				return x.deliver(r)
			}
			x.pending[r.idx] = r
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// ready returns the next result to hand out, if it has arrived.
func (x *xmap) ready() (result, bool) {
	if x.ordered {
		if r, ok := x.pending[x.delivered]; ok {
			delete(x.pending, x.delivered)
			return r, true
		}
	}
	if x.final != nil && x.final.idx == x.delivered {
		return *x.final, true
	}
	return result{}, false
}

func (x *xmap) deliver(r result) (tensor.Slots, error) {
	<-x.tokens
	x.delivered++
	x.finish(r.err)
	return r.item, r.err
}
