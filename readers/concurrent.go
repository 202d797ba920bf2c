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

// worker runs the goroutines of a concurrent decorator: started lazily on the
// first Next, cancelled and joined by stop.
type worker struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (w *worker) start(run ...func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for _, f := range run {
		w.wg.Go(func() { f(ctx) })
	}
}

func (w *worker) running() bool { return w.cancel != nil }

// stop cancels the goroutines and waits for them. It returns promptly as
// long as the source's Next honours its context.
func (w *worker) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.wg.Wait()
	w.cancel = nil
}

// ---- buffered ----

type buffered struct {
	decorated
	size int
	w    worker
	ch   chan result
	end  error // io.EOF or the error that ended the source, once delivered
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
	return &buffered{decorated: decorated{src: r}, size: size}
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
	if err := b.check(); err != nil {
		return nil, err
	}
	if b.end != nil {
		return nil, b.end
	}
	if !b.w.running() {
		// The channel holds size-1 items; the goroutine holds one more while
		// it waits to send, so size items are prefetched in all.
		b.ch = make(chan result, b.size-1)
		b.w.start(b.fill)
	}
	select {
	case r := <-b.ch:
		if r.err != nil {
			b.end = r.err
			b.w.stop() // the goroutine has returned or is about to
		}
		return r.item, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *buffered) Reset() error {
	if err := b.check(); err != nil {
		return err
	}
	b.w.stop()
	b.end = nil
	return b.src.Reset()
}

func (b *buffered) Close() error {
	b.w.stop()
	return b.decorated.Close()
}

// ---- xmap ----

type xmap struct {
	decorated
	fn        func(tensor.Slots) (tensor.Slots, error)
	workers   int
	buffer    int
	ordered   bool
	w         worker
	tokens    chan struct{} // one per item between source read and delivery
	results   chan result
	pending   map[int]result // ordered: results waiting for their turn
	delivered int            // items handed out this pass
	final     *result        // the source's end (EOF or error), held back
	end       error
}

// XMap returns a reader that applies fn to the items of r on workers
// goroutines (paddle.reader.xmap_readers). With ordered, items come out in
// the order of r; otherwise as they finish. At most workers+buffer items are
// between the source and the consumer at any time. An error from r or from
// fn reaches Next after every item read before it (ordered) or as soon as it
// is known (unordered, fn errors), and is returned again by later calls;
// goroutines are stopped and joined by Reset and Close. Panics if workers or
// buffer < 1.
func XMap(r Reader, fn func(tensor.Slots) (tensor.Slots, error), workers, buffer int, ordered bool) Reader {
	if workers < 1 || buffer < 1 {
		panic(fmt.Sprintf("readers: XMap workers %d and buffer %d must be at least 1", workers, buffer))
	}
	return &xmap{decorated: decorated{src: r}, fn: fn, workers: workers, buffer: buffer, ordered: ordered}
}

func (x *xmap) startPass() {
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
	x.w.start(run...)
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
	if err := x.check(); err != nil {
		return nil, err
	}
	if x.end != nil {
		return nil, x.end
	}
	if !x.w.running() {
		x.startPass()
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
	if r.err != nil {
		x.end = r.err
		x.w.stop()
	}
	return r.item, r.err
}

func (x *xmap) Reset() error {
	if err := x.check(); err != nil {
		return err
	}
	x.w.stop()
	x.end = nil
	return x.src.Reset()
}

func (x *xmap) Close() error {
	x.w.stop()
	return x.decorated.Close()
}
