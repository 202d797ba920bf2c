package readers

import (
	"context"
	"errors"
	"io"
	"iter"

	"github.com/actorfeed/actorfeed/tensor"
)

// Reader is the reader contract. See the package documentation.
type Reader interface {
	// Next returns the next instance or batch; io.EOF at the end of the
	// data. A blocked Next returns ctx.Err() when ctx is done.
	Next(ctx context.Context) (tensor.Slots, error)
	// Reset starts the data over from the beginning (PaddlePaddle Fluid's ReInit).
	Reset() error
	// Close releases the reader's resources. Closing twice is harmless.
	Close() error
}

// Sentinel errors of this package.
var (
	// ErrUncounted is a file reader's Count for records it cannot count
	// without reading them (a gzip stream with no decoded copy).
	ErrUncounted = errors.New("readers: records not counted without reading them")
	// ErrClosed is returned by Next and Reset after Close.
	ErrClosed = errors.New("readers: reader closed")
	// ErrResetUnsupported is returned by Reset of a reader that cannot start
	// over, such as a reader over a feed queue.
	ErrResetUnsupported = errors.New("readers: reset not supported")
	// ErrUnaligned is returned by a Compose reader when its readers end at
	// different lengths.
	ErrUnaligned = errors.New("readers: composed readers are not aligned")
	// ErrNilReader is returned by Next and Reset of a decorator whose source
	// is nil, typically the result of an Open whose error was ignored: the
	// decorator fails on first use instead of panicking there.
	ErrNilReader = errors.New("readers: the decorated reader is nil (was an Open's error ignored?)")
)

// nilReader stands in for a nil source: every read fails with ErrNilReader.
type nilReader struct{}

func (nilReader) Next(context.Context) (tensor.Slots, error) { return nil, ErrNilReader }
func (nilReader) Reset() error                               { return ErrNilReader }
func (nilReader) Close() error                               { return nil }

// source is r, or a reader that fails with ErrNilReader when r is nil, so
// that a decorator never dereferences a nil source.
func source(r Reader) Reader {
	if r == nil {
		return nilReader{}
	}
	return r
}

// sources applies source to each of rs.
func sources(rs []Reader) []Reader {
	out := make([]Reader, len(rs))
	for i, r := range rs {
		out[i] = source(r)
	}
	return out
}

// sliceReader yields a fixed list of items.
type sliceReader struct {
	items  []tensor.Slots
	pos    int
	closed bool
}

// FromSlice returns a reader over items, which it does not copy. Reset
// starts over.
func FromSlice(items []tensor.Slots) Reader { return &sliceReader{items: items} }

func (r *sliceReader) Next(ctx context.Context) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.pos >= len(r.items) {
		return nil, io.EOF
	}
	r.pos++
	return r.items[r.pos-1], nil
}

func (r *sliceReader) Reset() error {
	if r.closed {
		return ErrClosed
	}
	r.pos = 0
	return nil
}

func (r *sliceReader) Close() error { r.closed = true; return nil }

// Holder wraps any reader behind one type (PaddlePaddle Fluid's ReaderHolder) and adds
// HasNext by reading one item ahead. It is itself a Reader.
type Holder struct {
	r      Reader
	peeked bool
	item   tensor.Slots
	err    error
}

// NewHolder wraps r.
func NewHolder(r Reader) *Holder { return &Holder{r: r} }

// HasNext reports whether Next will return an item. It returns false at the
// end of the data, and false with the error when the next read fails; that
// error is returned again by Next (unless it came from ctx).
func (h *Holder) HasNext(ctx context.Context) (bool, error) {
	if !h.peeked {
		item, err := h.r.Next(ctx)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return false, err // not the reader's verdict: ask again later
		}
		h.peeked, h.item, h.err = true, item, err
	}
	switch {
	case h.err == nil:
		return true, nil
	case errors.Is(h.err, io.EOF):
		return false, nil
	default:
		return false, h.err
	}
}

// Next returns the item HasNext looked at, or reads a new one.
func (h *Holder) Next(ctx context.Context) (tensor.Slots, error) {
	if h.peeked {
		h.peeked = false
		item, err := h.item, h.err
		h.item, h.err = nil, nil
		return item, err
	}
	return h.r.Next(ctx)
}

// Reset drops the item looked at and resets the reader.
func (h *Holder) Reset() error {
	h.peeked, h.item, h.err = false, nil, nil
	return h.r.Reset()
}

// Close closes the reader.
func (h *Holder) Close() error {
	h.peeked, h.item, h.err = false, nil, nil
	return h.r.Close()
}

// All returns an iterator over the rest of r's items for range loops. It is
// single-use: it consumes the reader (call Reset to iterate again). An error
// is yielded once, with a nil item, and ends the iteration; io.EOF ends it
// silently.
func All(ctx context.Context, r Reader) iter.Seq2[tensor.Slots, error] {
	return func(yield func(tensor.Slots, error) bool) {
		for {
			item, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(item, nil) {
				return
			}
		}
	}
}

// ReadAll reads r to the end and returns every item.
func ReadAll(ctx context.Context, r Reader) ([]tensor.Slots, error) {
	var out []tensor.Slots
	for item, err := range All(ctx, r) {
		if err != nil {
			return out, err
		}
		out = append(out, item)
	}
	return out, nil
}
