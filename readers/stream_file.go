package readers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/tensor"
)

// stream reads one file's samples in order and seeks to one by the
// offsets of their headers: a WebDataset shard's samples, a TFRecord
// file's Examples.
type stream interface {
	Next() (tensor.Slots, error)
	Skip() error
	Offsets() ([]int64, error)
	Seek(n int, off int64) error
	Index() int
	Broken() bool
	Names() []string // the slots' names; nil until the first sample is read
}

// streamFormat is how a format's files become streams.
type streamFormat struct {
	name   string
	raw    func(r io.Reader, name string) stream
	gzip   func(r io.Reader, name string) (stream, error)
	decode decoder
}

var wdsFormat = &streamFormat{
	name:   "wds",
	raw:    func(r io.Reader, name string) stream { return wdsStream{wds.NewReader(r, name)} },
	decode: decodeWDS,
	gzip: func(r io.Reader, name string) (stream, error) {
		s, err := wds.NewGzipReader(r, name)
		if err != nil {
			return nil, err
		}
		return wdsStream{s}, nil
	},
}

type wdsStream struct{ *wds.Reader }

func (s wdsStream) Next() (tensor.Slots, error) {
	_, slots, err := s.Reader.Next()
	return slots, err
}

func (s wdsStream) Names() []string { return s.Fields() }

// tfrecordFormat reads Examples by spec, or by one inferred from each
// file's first record when spec is nil.
func tfrecordFormat(spec tfrecord.Spec) *streamFormat {
	return &streamFormat{
		name: "tfrecord",
		raw: func(r io.Reader, name string) stream {
			return tfStream{tfrecord.NewExamples(tfrecord.NewReader(r, name), spec)}
		},
		decode: decodeTFRecord,
		gzip: func(r io.Reader, name string) (stream, error) {
			s, err := tfrecord.NewGzipReader(r, name)
			if err != nil {
				return nil, err
			}
			return tfStream{tfrecord.NewExamples(s, spec)}, nil
		},
	}
}

type tfStream struct{ *tfrecord.Examples }

func (s tfStream) Names() []string { return s.Spec().Names() }

// streamFile reads a stream format's file, raw or gzip'd. A raw file seeks
// to a sample by the offsets of its samples' headers, read once a process
// for each file as it stands (streamOffsets); a gzip'd one is first swapped
// for its decoded copy (decodedCopy), or, where none can be had, read
// forward.
type streamFile struct {
	format     *streamFormat
	path, read string // the file named, which errors name; what is read
	opener     format.Opener
	f          *os.File
	r          stream
	gzipped    bool
	closed     bool
}

func openWDS(path string, opts OpenOptions) (Reader, error) {
	return openStream(wdsFormat, path, opts)
}

func openTFRecord(path string, opts OpenOptions) (Reader, error) {
	var spec tfrecord.Spec
	if opts.Params != "" {
		var err error
		if spec, err = tfrecord.ParseSpec(opts.Params); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEntry, err)
		}
	}
	return openStream(tfrecordFormat(spec), path, opts)
}

func openStream(sf *streamFormat, path string, opts OpenOptions) (Reader, error) {
	w := &streamFile{format: sf, path: path, read: path, opener: opts.Open}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *streamFile) open() error {
	f, _, err := format.OpenFileWith(w.openerOf(), w.format.name, w.read)
	if err != nil {
		return err
	}
	var magic [2]byte
	n, _ := f.ReadAt(magic[:], 0)
	w.f, w.gzipped = f, n == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	if !w.gzipped {
		w.r = w.format.raw(f, w.path)
		return nil
	}
	if w.r, err = w.format.gzip(f, w.path); err != nil {
		f.Close()
		w.f = nil
	}
	return err
}

func (w *streamFile) openerOf() format.Opener {
	if w.read != w.path {
		return nil
	}
	return w.opener
}

func (w *streamFile) Next(ctx context.Context) (tensor.Slots, error) {
	if err := w.ready(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return w.r.Next()
}

// SlotNames are the slots' names (a shard's fields, a spec's features),
// once a sample is read.
func (w *streamFile) SlotNames() []string {
	if w.r == nil {
		return nil
	}
	return w.r.Names()
}

// NextStacked reads the next sample onto st when it stacks (slots of
// fixed size: a shard's cls and npy, fixed features) and returns nil; otherwise it returns it as Next
// does.
func (w *streamFile) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	item, err := w.Next(ctx)
	if err != nil || !st.Append(item) {
		return item, err
	}
	return nil, nil
}

func (w *streamFile) ready() error {
	switch {
	case w.closed:
		return ErrClosed
	case w.r == nil:
		return fmt.Errorf("readers: %s could not be reopened by Reset", w.path)
	}
	return nil
}

// Count is the file's samples, from its headers (not its data), for a
// raw file or a gzip'd one whose decoded copy could be had; otherwise ok
// is false, and the caller counts by reading.
func (w *streamFile) Count() (n uint64, ok bool) {
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
func (w *streamFile) Seek(n int) error {
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

// seekRaw seeks a raw file to sample n; n past the last is its end.
func (w *streamFile) seekRaw(n int) error {
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
// framing (a tar header, a record's length) was, a raw file seeks to the
// next sample's header.
func (w *streamFile) SkipCorrupt() (records int, ok bool) {
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

// offsets are the raw file's samples' offsets (streamOffsets).
func (w *streamFile) offsets() ([]int64, error) {
	id, err := identity(w.read, w.f)
	if err != nil {
		return nil, err
	}
	id = w.format.name + ":" + id
	if o, ok := streamOffsets.Load(id); ok {
		return o.([]int64), nil
	}
	f, _, err := format.OpenFileWith(w.openerOf(), w.format.name, w.read)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	o, err := w.format.raw(f, w.path).Offsets()
	if err != nil {
		return nil, err
	}
	streamOffsets.Store(id, o)
	return o, nil
}

// streamOffsets keeps each raw file's sample offsets by its format and
// identity: 8 bytes a sample, read once a process.
var streamOffsets sync.Map

// useDecoded reopens the reader on the shard's decoded copy, at sample
// 0, when one can be had; otherwise it leaves it as it was.
func (w *streamFile) useDecoded() {
	read, err := decodedCopy(w.format.name, w.path, w.opener, w.format.decode)
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

func (w *streamFile) close() error {
	var err error
	if w.f != nil {
		err = w.f.Close()
	}
	w.f, w.r = nil, nil
	return err
}

func (w *streamFile) Reset() error {
	if w.closed {
		return ErrClosed
	}
	return errors.Join(w.close(), w.open())
}

func (w *streamFile) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.close()
}
