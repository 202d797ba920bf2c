package readers

import (
	"context"
	"errors"
	"fmt"

	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/tensor"
)

// ErrNotPositional is wrapped by a Positional reader's Addressable error:
// its records cannot each be read alone at the cost of that record.
var ErrNotPositional = errors.New("the records cannot be read by position")

// NotPositionalError is why File's records cannot be read by position
// (Why, after the file's name), and what to do for a global order (Fix).
// It wraps ErrNotPositional; its message adds that a window shuffles the
// file as it is.
type NotPositionalError struct {
	File, Why, Fix string
}

func (e *NotPositionalError) Error() string {
	return fmt.Sprintf("%v: %s %s: %s, or shuffle in a window (--shuffle N)", ErrNotPositional, e.File, e.Why, e.Fix)
}

func (e *NotPositionalError) Unwrap() error { return ErrNotPositional }

// Positional is a file reader that reads any record by its index, at the
// cost of that record alone: what a global order (actors' Shuffle.Global)
// reads with. IDX files, TFRecord files and WebDataset shards are
// positional when raw (or gzip'd with a decoded copy, DecodeCacheEnv) and
// on local disk (or an object served from the object cache,
// ObjectCacheEnv); RecordIO files are not (see RecordFile.Addressable).
type Positional interface {
	Reader
	// Addressable is nil when RecordAt reads a record at the cost of that
	// record; otherwise an error wrapping ErrNotPositional that names the
	// file, says why, and says what to do.
	Addressable() error
	// RecordAt reads record n as Next would return it. It may move the
	// reader: a Next after it reads from wherever RecordAt left it.
	RecordAt(ctx context.Context, n int) (tensor.Slots, error)
}

// Addressable says whether the IDX file's samples can be read by
// position: a raw file, or a gzip'd one with a decoded copy.
func (r *idxFile) Addressable() error {
	if r.closed || r.pair == nil && r.one == nil {
		return ErrClosed
	}
	if r.gzipped() {
		r.useDecoded()
	}
	if r.gzipped() {
		return &NotPositionalError{File: r.images, Fix: "decompress it (gunzip -k)",
			Why: fmt.Sprintf("is gzip'd and no decoded copy of it could be made (%s is off, full or not writable)", DecodeCacheEnv)}
	}
	return nil
}

// RecordAt reads sample n at its offset (pread).
func (r *idxFile) RecordAt(ctx context.Context, n int) (tensor.Slots, error) {
	if err := r.Addressable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.pair == nil {
		t, err := r.one.SampleAt(n)
		if err != nil {
			return nil, err
		}
		return tensor.Slots{{Tensor: t}}, nil
	}
	img, err := r.pair.Images.SampleAt(n)
	if err != nil {
		return nil, err
	}
	lbl, err := r.pair.Labels.SampleAt(n)
	if err != nil {
		return nil, err
	}
	return tensor.Slots{{Tensor: img}, {Tensor: lbl}}, nil
}

// RecordBytes is the memory RecordInto reads a record into: the image's
// bytes and the label's, each rounded up to 8 so that a typed view of
// either is aligned.
func (r *idxFile) RecordBytes() int {
	if r.pair == nil {
		if r.one == nil {
			return 0
		}
		return align8(r.one.SampleBytes())
	}
	return align8(r.pair.Images.SampleBytes()) + align8(r.pair.Labels.SampleBytes())
}

// RecordInto is RecordAt reading into dst, RecordBytes long and aligned to
// 8, which the slots it returns wrap: a gather of many records then
// allocates nothing a record.
func (r *idxFile) RecordInto(ctx context.Context, n int, dst []byte) (tensor.Slots, error) {
	if err := r.Addressable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(dst) != r.RecordBytes() {
		return nil, fmt.Errorf("readers: %s: record %d: %d bytes to read it into, want %d", r.images, n, len(dst), r.RecordBytes())
	}
	if r.pair == nil {
		t, err := r.one.SampleInto(n, dst[:r.one.SampleBytes()])
		if err != nil {
			return nil, err
		}
		return tensor.Slots{{Tensor: t}}, nil
	}
	a := r.pair.Images.SampleBytes()
	img, err := r.pair.Images.SampleInto(n, dst[:a])
	if err != nil {
		return nil, err
	}
	lbl, err := r.pair.Labels.SampleInto(n, dst[align8(a):align8(a)+r.pair.Labels.SampleBytes()])
	if err != nil {
		return nil, err
	}
	return tensor.Slots{{Tensor: img}, {Tensor: lbl}}, nil
}

func align8(n int) int { return (n + 7) &^ 7 }

// Addressable says whether the shard's or TFRecord file's samples can be
// read by position: a raw file, or a gzip'd one with a decoded copy, on
// local disk or served from the object cache.
func (w *streamFile) Addressable() error {
	if err := w.ready(); err != nil {
		return err
	}
	if w.gzipped {
		w.useDecoded()
	}
	if w.gzipped {
		return &NotPositionalError{File: w.path, Fix: "decompress it",
			Why: fmt.Sprintf("is gzip'd and no decoded copy of it could be made (%s is off, full or not writable)", DecodeCacheEnv)}
	}
	if o, ok := w.src.(*objstore.Object); ok && !o.Local() {
		return &NotPositionalError{File: w.path, Fix: fmt.Sprintf("turn the cache on (%s=DIR)", ObjectCacheEnv),
			Why: "is an object not in the object cache, and each record read alone would be a GET of its own"}
	}
	if _, err := w.index(); err != nil {
		return err
	}
	return nil
}

// RecordAt seeks to sample n by the file's index and reads it.
func (w *streamFile) RecordAt(ctx context.Context, n int) (tensor.Slots, error) {
	if err := w.Addressable(); err != nil {
		return nil, err
	}
	if w.r.Index() != n {
		if err := w.seekRaw(n); err != nil {
			return nil, err
		}
	}
	return w.Next(ctx)
}

// Addressable is never nil for RecordIO: a chunk's checksum covers the
// whole chunk, so a record read alone would go unchecked, and checked it
// costs its chunk (docs/determinism.md, "The global order").
func (r *RecordFile) Addressable() error {
	return &NotPositionalError{File: r.path, Why: "is RecordIO, whose checksums cover whole chunks, so a record cannot be read alone and checked",
		Fix: "write the data as IDX, TFRecord or WebDataset files (actorfeed convert writes them from IDX)"}
}

// RecordAt fails: see Addressable.
func (r *RecordFile) RecordAt(context.Context, int) (tensor.Slots, error) {
	return nil, r.Addressable()
}
