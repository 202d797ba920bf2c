package readers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/tensor"
)

// wdsFile reads a WebDataset shard (readers/wds), raw or gzip'd. A raw
// shard seeks to a sample by the offsets of its samples' first headers,
// read once a process for each shard as it stands (shardOffsets); a gzip'd
// one is first swapped for its decoded copy (decodedCopy), or, where none
// can be had, read forward.
type wdsFile struct {
	path, read string // the shard named, which errors name; what is read
	opener     format.Opener
	f          *os.File
	r          *wds.Reader
	gzipped    bool
	closed     bool
}

func openWDS(path string, opts OpenOptions) (Reader, error) {
	w := &wdsFile{path: path, read: path, opener: opts.Open}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *wdsFile) open() error {
	f, _, err := format.OpenFileWith(w.openerOf(), "wds", w.read)
	if err != nil {
		return err
	}
	var magic [2]byte
	n, _ := f.ReadAt(magic[:], 0)
	w.f, w.gzipped = f, n == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	if !w.gzipped {
		w.r = wds.NewReader(f, w.path)
		return nil
	}
	if w.r, err = wds.NewGzipReader(f, w.path); err != nil {
		f.Close()
		w.f = nil
	}
	return err
}

// openerOf is how what is read opens: the opener the shard came with, or
// none for the cache's copy, which is no file the opener was given.
func (w *wdsFile) openerOf() format.Opener {
	if w.read != w.path {
		return nil
	}
	return w.opener
}

func (w *wdsFile) Next(ctx context.Context) (tensor.Slots, error) {
	if err := w.ready(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, slots, err := w.r.Next()
	return slots, err
}

// SlotNames are the shard's fields, the slots' names, once a sample is
// read.
func (w *wdsFile) SlotNames() []string {
	if w.r == nil {
		return nil
	}
	return w.r.Fields()
}

// NextStacked reads the next sample onto st when it stacks (fields of
// fixed size: cls, npy) and returns nil; otherwise it returns it as Next
// does.
func (w *wdsFile) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	item, err := w.Next(ctx)
	if err != nil || !st.Append(item) {
		return item, err
	}
	return nil, nil
}

func (w *wdsFile) ready() error {
	switch {
	case w.closed:
		return ErrClosed
	case w.r == nil:
		return fmt.Errorf("readers: %s could not be reopened by Reset", w.path)
	}
	return nil
}

// Count is the shard's samples, from its headers (not its data), for a
// raw shard or a gzip'd one whose decoded copy could be had; otherwise ok
// is false, and the caller counts by reading.
func (w *wdsFile) Count() (n uint64, ok bool) {
	if w.ready() != nil {
		return 0, false
	}
	if w.gzipped {
		w.useDecoded()
	}
	if w.gzipped {
		return 0, false
	}
	offsets, err := w.offsets()
	if err != nil {
		return 0, false
	}
	return uint64(len(offsets)), true
}

// Seek moves the reader to sample n.
func (w *wdsFile) Seek(n int) error {
	if err := w.ready(); err != nil {
		return err
	}
	if n > 0 && w.gzipped {
		w.useDecoded()
	}
	if w.gzipped {
		if n < w.r.Index() {
			return fmt.Errorf("readers: %s: seek back to sample %d from %d in a gzip stream", w.path, n, w.r.Index())
		}
		for w.r.Index() < n {
			if err := w.r.Skip(); err != nil {
				return err
			}
		}
		return nil
	}
	return w.seekRaw(n)
}

// seekRaw seeks a raw shard to sample n; n past the last is its end.
func (w *wdsFile) seekRaw(n int) error {
	offsets, err := w.offsets()
	if err != nil {
		return err
	}
	if n < 0 || n > len(offsets) {
		return fmt.Errorf("readers: %s: seek to sample %d of %d", w.path, n, len(offsets))
	}
	if n == len(offsets) {
		st, err := w.f.Stat()
		if err != nil {
			return err
		}
		return w.r.Seek(n, st.Size())
	}
	return w.r.Seek(n, offsets[n])
}

// SkipCorrupt passes over the sample the last error was in: the reader
// stands after it already when that sample's data was damaged; when the
// tar itself was, a raw shard seeks to the next sample's header.
func (w *wdsFile) SkipCorrupt() (records int, ok bool) {
	if w.ready() != nil {
		return 0, false
	}
	if !w.r.Broken() {
		return 1, true
	}
	if w.gzipped || w.seekRaw(w.r.Index()+1) != nil {
		return 0, false
	}
	return 1, true
}

// offsets are the raw shard's samples' offsets (shardOffsets).
func (w *wdsFile) offsets() ([]int64, error) {
	id, err := identity(w.read, w.f)
	if err != nil {
		return nil, err
	}
	if o, ok := shardOffsets.Load(id); ok {
		return o.([]int64), nil
	}
	f, _, err := format.OpenFileWith(w.openerOf(), "wds", w.read)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	o, err := wds.NewReader(f, w.path).Offsets()
	if err != nil {
		return nil, err
	}
	shardOffsets.Store(id, o)
	return o, nil
}

// shardOffsets keeps each raw shard's sample offsets by its identity: 8
// bytes a sample, read once a process.
var shardOffsets sync.Map

// useDecoded reopens the reader on the shard's decoded copy, at sample
// 0, when one can be had; otherwise it leaves it as it was.
func (w *wdsFile) useDecoded() {
	read, err := decodedCopy("wds", w.path, w.opener, decodeWDS)
	if err != nil {
		return
	}
	was := w.read
	w.close()
	w.read = read
	if w.open() != nil {
		w.read = was
		w.open()
	}
}

func (w *wdsFile) close() error {
	var err error
	if w.f != nil {
		err = w.f.Close()
	}
	w.f, w.r = nil, nil
	return err
}

func (w *wdsFile) Reset() error {
	if w.closed {
		return ErrClosed
	}
	return errors.Join(w.close(), w.open())
}

func (w *wdsFile) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.close()
}
