package objstore

import (
	"sync"
)

// A reader that moves forward through an object (a RecordIO file's
// chunks, a shard's windows, a stream read in order) would wait out a
// request's round trip at every read. The read-ahead fetches the next
// bytes while the reader works on these: at most two windows an object,
// each twice the largest read seen, between minAhead and maxAhead, so
// the bytes in flight are bounded by the reads, not by the object.
const (
	minAhead = 1 << 20
	maxAhead = 8 << 20
)

// readAhead is an Object's windows ahead of its reader.
type readAhead struct {
	mu      sync.Mutex
	wins    []*window // contiguous, in order
	lastEnd int64     // where the last read ended
	run     int       // reads in a row, each where the last ended
	span    int       // the largest read seen
	until   int64     // where the reader means to stop (0: nowhere said)
	wg      sync.WaitGroup
}

// window is a range being fetched; buf and err are set when done closes.
type window struct {
	at   int64
	size int
	buf  []byte
	err  error
	done chan struct{}
}

// serve copies into p what the windows hold of the bytes at off, from its
// start, and returns how many. A window that failed is dropped: the
// reader's own fetch then says what is wrong.
func (a *readAhead) serve(p []byte, off int64) int {
	n := 0
	for n < len(p) {
		w := a.at(off + int64(n))
		if w == nil {
			break
		}
		<-w.done
		if w.err != nil || len(w.buf) < w.size {
			a.drop()
			break
		}
		n += copy(p[n:], w.buf[off+int64(n)-w.at:])
	}
	return n
}

// at is the window that holds byte off.
func (a *readAhead) at(off int64) *window {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.wins {
		if off >= w.at && off < w.at+int64(w.size) {
			return w
		}
	}
	return nil
}

func (a *readAhead) drop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.wins = nil
}

// next keeps a window's worth ahead of a read of [off, end) that is the
// third or later in a run, each going on where the last ended. Reads that
// skip (a RecordIO index's headers) or come in pairs (a chunk's header
// and payload, read in a shuffled order) are not read ahead of.
func (a *readAhead) next(o *Object, off, end int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if off == a.lastEnd && off > 0 {
		a.run++
	} else {
		a.run = 0
	}
	forward := a.run >= 2
	a.lastEnd = end
	a.span = max(a.span, int(end-off))
	for len(a.wins) > 0 && a.wins[0].at+int64(a.wins[0].size) <= end {
		a.wins = a.wins[1:]
	}
	if len(a.wins) > 0 && a.wins[0].at > end {
		a.wins = nil // a jump back: what was ahead is far off
	}
	if !forward {
		return
	}
	size := min(max(2*a.span, minAhead), maxAhead)
	from := end
	if k := len(a.wins); k > 0 {
		from = a.wins[k-1].at + int64(a.wins[k-1].size)
	}
	stop := o.size
	if a.until >= end { // a bound the reader has not passed yet
		stop = min(stop, a.until)
	}
	for len(a.wins) < 2 && from < stop && from-end < int64(size) {
		w := &window{at: from, size: int(min(int64(size), stop-from)), done: make(chan struct{})}
		a.wins = append(a.wins, w)
		from += int64(w.size)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer close(w.done)
			buf := make([]byte, w.size)
			n, err := o.fetch(buf, w.at)
			w.buf, w.err = buf[:n], err
		}()
	}
}

// bound says the reader means to stop reading at byte until.
func (a *readAhead) bound(until int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.until = until
}

// wait waits for the windows being fetched (Close has ended them).
func (a *readAhead) wait() { a.wg.Wait() }
