package actors

import (
	"github.com/actorfeed/actorfeed/readers"
)

// keptReader is the reader a run over a file left open, for the worker's
// next run over the same file. In an order a reader is dealt a file's
// chunks one run at a time, and opening the file for each run (open, stat,
// close, fresh buffers: about 50 a pass) cost about two hundredths of the
// order's throughput (docs/performance.md). Only a reader that seeks
// through its file's kept chunk index is kept, with its watchdog: the
// context it was opened with stays alive while it is kept, for readers
// that read with it.
type keptReader struct {
	file int
	r    readers.Reader
	w    *watchdog
}

func (k keptReader) close() {
	if k.r != nil {
		k.w.close()
		k.r.Close()
	}
}

// reseeker is a source that moves an open reader of one of its files to a
// record.
type reseeker interface {
	seek(file int, r indexed, rec int) error
}

// keep keeps r, the reader of file that a run read to its assignment's
// end, and w, its watchdog, closing the reader kept before. It reports
// false, keeping nothing, when r cannot be kept: it does not seek by an
// index, its context ended, or the actor stopped.
func (c *workerCell) keep(file int, r readers.Reader, w *watchdog) bool {
	_, seeks := c.src.(reseeker)
	if _, ok := r.(indexed); !ok || !seeks || !w.detach() {
		return false
	}
	c.mu.Lock()
	closing := c.kept
	if c.stopped {
		closing = keptReader{file: file, r: r, w: w} // nothing is kept once the actor stopped
	} else {
		c.kept = keptReader{file: file, r: r, w: w}
	}
	c.mu.Unlock()
	closing.close()
	return true
}

// reuse moves the reader the worker kept open on the run's file to the
// run's first record, under the run's context. It reports false when no
// reader of the file was kept or the seek failed; the file is then opened
// afresh, which reports what is wrong with it.
func (fr *fileRead) reuse() bool {
	c := fr.c
	c.mu.Lock()
	k := c.kept
	c.kept = keptReader{}
	c.mu.Unlock()
	if k.r == nil {
		return false
	}
	if k.file != fr.file {
		k.close()
		return false
	}
	fr.w.close()
	k.w.attach(fr.ctx)
	err := k.w.guard(fr.ctx, func() error { return c.src.(reseeker).seek(fr.file, k.r.(indexed), int(fr.from)) })
	if err != nil {
		k.close()
		return false
	}
	fr.r, fr.w = k.r, k.w
	return true
}

// dropKept closes the kept reader; with stop, none is kept after.
func (c *workerCell) dropKept(stop bool) {
	c.mu.Lock()
	k := c.kept
	c.kept, c.stopped = keptReader{}, c.stopped || stop
	c.mu.Unlock()
	k.close()
}
