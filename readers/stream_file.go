package readers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
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

// ontoStack is a stream that reads a sample straight onto a stack when it
// stacks, returning nil, and returns it otherwise.
type ontoStack interface {
	NextOnto(st *tensor.Stack) (tensor.Slots, error)
}

// streamFormat is how a format's files become streams.
type streamFormat struct {
	name   string
	raw    func(r io.Reader, name string) stream
	gzip   func(r io.Reader, name string) (stream, error)
	decode decoder
	// index reads a raw file's index from src: where each sample starts,
	// and whatever else byIndex reads by. Nil: the raw stream's Offsets.
	index func(src *io.SectionReader, name string) (streamIndex, error)
	// byIndex, when set, reads a raw file by its index rather than
	// through raw.
	byIndex func(ix streamIndex, src Source, name string) stream
	// saveIndex and loadIndex, when set, keep a raw file's index in the
	// decode cache for the next process.
	saveIndex func(ix streamIndex) ([]byte, error)
	loadIndex func(b []byte, size int64) (streamIndex, error)
}

// streamIndex is a raw file's index: where each sample starts.
type streamIndex interface{ Starts() []int64 }

// offsets is the index of a format that seeks by its samples' offsets.
type offsets []int64

func (o offsets) Starts() []int64 { return o }

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
	index: func(src *io.SectionReader, name string) (streamIndex, error) {
		sp, err := wds.ScanSpans(src, src.Size(), name)
		if sp == nil {
			return nil, err // no spans: no index, not a nil *Spans in one
		}
		return sp, err
	},
	byIndex: func(ix streamIndex, src Source, name string) stream {
		sp := ix.(*wds.Spans)
		return spanStream{wds.NewSpanReader(src, src.Size(), name, sp), sp}
	},
	saveIndex: func(ix streamIndex) ([]byte, error) { return ix.(*wds.Spans).MarshalBinary() },
	loadIndex: func(b []byte, size int64) (streamIndex, error) { return wds.UnmarshalSpans(b, size) },
}

type wdsStream struct{ *wds.Reader }

func (s wdsStream) Next() (tensor.Slots, error) {
	_, slots, err := s.Reader.Next()
	return slots, err
}

func (s wdsStream) Names() []string { return s.Fields() }

// spanStream reads a raw shard by its spans: no tar header is parsed
// again, and whatever goes wrong with a sample, the next one can be read.
type spanStream struct {
	*wds.SpanReader
	sp *wds.Spans
}

func (s spanStream) Offsets() ([]int64, error) { return s.sp.Starts(), nil }
func (s spanStream) Seek(n int, _ int64) error { return s.SpanReader.Seek(n) }
func (s spanStream) Broken() bool              { return false }
func (s spanStream) Names() []string           { return s.sp.Fields() }

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
// to a sample by its index (the offsets of its samples' headers; for a
// shard, where each field's data lies, which it is then read by), read
// once a process for each file as it stands (streamIndexes); a gzip'd one
// is first swapped for its decoded copy (decodedCopy), or, where none can
// be had, read forward.
type streamFile struct {
	format     *streamFormat
	path, read string // the file named, which errors name; what is read
	opener     format.Opener
	source     func() (Source, error) // OpenStream's; nil: the file
	src        Source
	f          *os.File    // the file src reads, when it is one: its identity keys the index
	ix         streamIndex // the raw file's index, once read
	version    string      // the object's ETag, once read from a decoded copy of it
	modified   time.Time   // and when that version was written
	noCopy     bool        // a decoded copy was made but could not be opened
	r          stream
	gzipped    bool
	closed     bool
}

// Source is what a stream file (a WebDataset shard, a TFRecord file) is
// read from in place of its file: OpenStream's.
type Source interface {
	io.ReadSeeker
	io.ReaderAt
	io.Closer
	Size() int64
}

// fileSource is a file as a Source.
type fileSource struct {
	*os.File
	size int64
}

func (f fileSource) Size() int64 { return f.size }

// OpenStream opens entry, a WebDataset shard or a TFRecord file as Open
// names them, reading its bytes from what source returns, called at the
// open and at every Reset, instead of from the file. Fault injection reads
// files through it. Its index is read at every open (no file identity
// keeps it), and a gzip'd one is read forward only.
func OpenStream(entry string, source func() (Source, error)) (Reader, error) {
	f, params, path, err := resolve(entry)
	if err != nil {
		return nil, err
	}
	var sf *streamFormat
	switch f.Name {
	case "wds":
		sf = wdsFormat
	case "tfrecord":
		if sf, err = tfrecordOf(params); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s: OpenStream reads WebDataset shards and TFRecord files", ErrUnknownFormat, entry)
	}
	w := &streamFile{format: sf, path: path, read: path, source: source}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func openWDS(path string, opts OpenOptions) (Reader, error) {
	return openStream(wdsFormat, path, opts)
}

func openTFRecord(path string, opts OpenOptions) (Reader, error) {
	sf, err := tfrecordOf(opts.Params)
	if err != nil {
		return nil, err
	}
	return openStream(sf, path, opts)
}

// tfrecordOf is the TFRecord format read by the spec params ("": each
// file's first record's).
func tfrecordOf(params string) (*streamFormat, error) {
	var spec tfrecord.Spec
	if params != "" {
		var err error
		if spec, err = tfrecord.ParseSpec(params); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEntry, err)
		}
	}
	return tfrecordFormat(spec), nil
}

func openStream(sf *streamFormat, path string, opts OpenOptions) (Reader, error) {
	w := &streamFile{format: sf, path: path, read: path, opener: opts.Open}
	if objstore.IsURL(path) {
		w.source = func() (Source, error) {
			o, err := openObject(opts, path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sf.name, err)
			}
			return o, nil
		}
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *streamFile) open() error {
	src, err := w.openSource()
	if err != nil {
		return err
	}
	var magic [2]byte
	n, _ := src.ReadAt(magic[:], 0)
	w.src, w.gzipped = src, n == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	if _, object := src.(*objstore.Object); object && w.gzipped {
		// An object read forward would be fetched again at every open and
		// every Reset: its decoded copy is read from the start instead.
		if w.useDecoded(); !w.gzipped {
			return nil
		}
	}
	if !w.gzipped && w.format.byIndex != nil {
		ix, err := w.index()
		if err != nil {
			w.close()
			return err
		}
		if d, ok := ix.(damagedIndex); ok {
			w.r = &tailStream{stream: w.format.byIndex(d.streamIndex, src, w.path), n: len(d.Starts()), damage: d.damage}
			return nil
		}
		w.r = w.format.byIndex(ix, src, w.path)
		return nil
	}
	if !w.gzipped {
		w.r = w.format.raw(src, w.path)
		return nil
	}
	if w.r, err = w.format.gzip(src, w.path); err != nil {
		w.close()
	}
	return err
}

// openSource opens what is read: OpenStream's source, or the file.
func (w *streamFile) openSource() (Source, error) {
	if w.source != nil {
		return w.source()
	}
	f, size, err := format.OpenFileWith(w.openerOf(), w.format.name, w.read)
	if err != nil {
		return nil, err
	}
	w.f = f
	return fileSource{f, size}, nil
}

// Version is the version of the object read (its ETag), "" for a file.
func (w *streamFile) Version() string {
	if w.version != "" {
		return w.version
	}
	return versionOf(w.src)
}

// Modified is when the object read was written, zero for a file.
func (w *streamFile) Modified() time.Time {
	if w.version != "" {
		return w.modified
	}
	return modifiedOf(w.src)
}

// id names what src reads as it stands, for the indexes and copies kept
// of it: a file's identity, an object version's; "" for OpenStream's
// source, which nothing names.
func (w *streamFile) id() (string, error) {
	if w.f != nil {
		return identity(w.read, w.f)
	}
	if o, ok := w.src.(*objstore.Object); ok {
		return objectIdentity(o), nil
	}
	return "", nil
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

// NextStacked reads the next sample onto st when it stacks and returns
// nil; otherwise it returns it as Next does. A stream that reads onto a
// stack itself (a shard by its spans, TFRecord Examples) allocates
// nothing for a sample that stacks.
func (w *streamFile) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	if err := w.ready(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s, ok := w.r.(ontoStack); ok {
		return s.NextOnto(st)
	}
	item, err := w.r.Next()
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
// raw file or a gzip'd one whose decoded copy could be had; otherwise the
// error is ErrUncounted, and the caller counts by reading. An error
// reading the headers is returned: damage to them, or a failed read,
// which a retry may get past.
func (w *streamFile) Count() (uint64, error) {
	if err := w.ready(); err != nil {
		return 0, err
	}
	if w.gzipped {
		w.useDecoded()
	}
	if w.gzipped {
		return 0, ErrUncounted
	}
	ix, err := w.index()
	if err != nil {
		return 0, err
	}
	n := uint64(len(ix.Starts()))
	if d, ok := ix.(damagedIndex); ok {
		return n, &DamagedTail{Samples: n, Err: d.damage}
	}
	return n, nil
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

// ReadUntil says the reader will read no sample from n on (n <= 0: it
// reads to the end): an object's read-ahead then stops where sample n
// starts.
func (w *streamFile) ReadUntil(n int) {
	o, ok := w.src.(*objstore.Object)
	if !ok || w.ix == nil {
		return
	}
	until := int64(0)
	if starts := w.ix.Starts(); n > 0 && n < len(starts) {
		until = starts[n]
	}
	o.ReadUntil(until)
}

// seekRaw seeks a raw file to sample n; n past the last is its end.
func (w *streamFile) seekRaw(n int) error {
	ix, err := w.index()
	if err != nil {
		return err
	}
	offsets := ix.Starts()
	if n < 0 || n > len(offsets) {
		return fmt.Errorf("readers: %s: seek to sample %d of %d", w.path, n, len(offsets))
	}
	if n == len(offsets) {
		return w.r.Seek(n, w.src.Size())
	}
	return w.r.Seek(n, offsets[n])
}

// SampleKey is sample n's key, the name its fields share, when the file is
// a WebDataset shard that can be indexed; errors name what could not be
// read. It does not move the reader, but that a gzip'd shard is first
// swapped for its decoded copy at sample 0.
func (w *streamFile) SampleKey(n int) (string, error) {
	if err := w.ready(); err != nil {
		return "", err
	}
	if w.format != wdsFormat {
		return "", fmt.Errorf("readers: %s: a %s file's samples have no keys", w.path, w.format.name)
	}
	if w.gzipped {
		w.useDecoded()
	}
	if w.gzipped {
		return "", fmt.Errorf("readers: %s: no decoded copy to find sample %d's key in", w.path, n)
	}
	ix, err := w.index()
	if err != nil {
		return "", err
	}
	starts := ix.Starts()
	if n < 0 || n >= len(starts) {
		return "", fmt.Errorf("readers: %s: no sample %d of %d", w.path, n, len(starts))
	}
	return wds.KeyAt(w.src, w.src.Size(), starts[n], w.path)
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

// index is the raw file's index, read through src without moving it; a
// file's kept by its identity, in the process (streamIndexes) and, for a
// format that can, in the decode cache for the next one.
func (w *streamFile) index() (streamIndex, error) {
	if w.ix != nil {
		return w.ix, nil
	}
	id, err := w.id()
	if err != nil {
		return nil, err
	}
	if id != "" {
		if ix, ok := streamIndexes.Load(w.format.name + ":" + id); ok {
			w.ix = ix.(streamIndex)
			return w.ix, nil
		}
		if ix := keptIndex(w.format, id, w.src.Size()); ix != nil {
			streamIndexes.Store(w.format.name+":"+id, ix)
			w.ix = ix
			return ix, nil
		}
	}
	r := io.NewSectionReader(w.src, 0, w.src.Size())
	var ix streamIndex
	if w.format.index != nil {
		ix, err = w.format.index(r, w.path)
	} else {
		var o []int64
		o, err = w.format.raw(r, w.path).Offsets()
		ix = offsets(o)
	}
	switch {
	case errors.Is(err, format.ErrFraming) && ix != nil:
		// The samples before the damage can be read, and nothing after
		// it found: the index holds them, and says why it ends there.
		// It is kept in the process, not past it.
		ix = damagedIndex{ix, err}
		if id != "" {
			streamIndexes.Store(w.format.name+":"+id, ix)
		}
	case err != nil:
		return nil, err
	case id != "":
		streamIndexes.Store(w.format.name+":"+id, ix)
		keepIndex(w.format, id, ix)
	}
	w.ix = ix
	return ix, nil
}

// tailStream reads a file by an index that ends at damage to its framing:
// past its n samples it fails with the damage, as the file read in order
// would, rather than end.
type tailStream struct {
	stream
	n      int
	damage error
}

func (t *tailStream) Next() (tensor.Slots, error) {
	if t.Index() >= t.n {
		return nil, t.damage
	}
	return t.stream.Next()
}

func (t *tailStream) NextOnto(st *tensor.Stack) (tensor.Slots, error) {
	if t.Index() >= t.n {
		return nil, t.damage
	}
	if o, ok := t.stream.(ontoStack); ok {
		return o.NextOnto(st)
	}
	return t.stream.Next()
}

func (t *tailStream) Skip() error {
	if t.Index() >= t.n {
		return t.damage
	}
	return t.stream.Skip()
}

func (t *tailStream) Broken() bool { return t.Index() >= t.n || t.stream.Broken() }

// damagedIndex is the index of a raw file whose framing is damaged: the
// samples before the damage, and the damage (a *format.Error matching
// format.ErrFraming).
type damagedIndex struct {
	streamIndex
	damage error
}

// DamagedTail is Count's error for a file whose framing is damaged (a
// TFRecord length, a tar header): its first Samples samples lie before
// the damage and can be read, and what follows cannot be found. Err
// locates the damage (a *format.Error matching format.ErrFraming).
type DamagedTail struct {
	Samples uint64
	Err     error
}

func (d *DamagedTail) Error() string { return d.Err.Error() }
func (d *DamagedTail) Unwrap() error { return d.Err }

// streamIndexes keeps each raw file's index by its format and identity:
// 8 bytes a sample (a shard's spans 8 more a field), read once a process.
var streamIndexes sync.Map

// useDecoded reopens the reader on the file's decoded copy, at sample 0,
// when one can be had (not for OpenStream's source); otherwise it leaves
// it as it was. An object's copy is of the version opened, and the reader
// goes on naming that version.
func (w *streamFile) useDecoded() {
	o, object := w.src.(*objstore.Object)
	if w.noCopy || w.source != nil && !object {
		return
	}
	var read string
	var err error
	if object {
		// Its own reader: the stream, if any, reads on from where it is.
		src := bufio.NewReaderSize(io.NewSectionReader(o, 0, o.Size()), 256<<10)
		read, err = decodeOnce(objectIdentity(o), w.path, src, o.Size(), w.format.decode)
	} else {
		read, err = decodedCopy(w.format.name, w.path, w.opener, w.format.decode)
	}
	if err != nil {
		return
	}
	was, source := w.read, w.source
	w.close()
	w.read, w.ix, w.source = read, nil, nil
	if object {
		w.version, w.modified = o.ETag(), o.Modified()
	}
	if w.open() != nil {
		w.read, w.source, w.version, w.modified, w.noCopy = was, source, "", time.Time{}, true
		w.open()
	}
}

func (w *streamFile) close() error {
	var err error
	if w.src != nil {
		err = w.src.Close()
	}
	w.src, w.f, w.r = nil, nil, nil
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
