package readers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

func init() {
	Register(Format{Name: "recordio", Suffixes: []string{".recordio", ".rio"}, Open: openRecordIO})
	Register(Format{Name: "idx", Suffixes: []string{"-ubyte", "-ubyte.gz", ".idx", ".idx.gz"}, Open: openIDX})
	Register(Format{Name: "wds", Suffixes: []string{".tar", ".tar.gz", ".tgz"}, Open: openWDS})
	Register(Format{Name: "tfrecord", Suffixes: []string{".tfrecord", ".tfrecord.gz", ".tfrecords"}, Open: openTFRecord,
		Params: func(spec string) error { _, err := tfrecord.ParseSpec(spec); return err }})
}

// RecordFile reads a RecordIO file whose records are tensor encodings
// (tensor.Encode), one instance each.
type RecordFile struct {
	path   string
	f      io.ReaderAt
	closer io.Closer
	size   int64
	sc     *recordio.Scanner
	closed bool
	badRec bool // the last Next failed on an undecodable record
	// index is the chunk index the last SeekIndexed used: what the file
	// held when it was indexed, which SkipCorrupt goes by.
	index *recordio.Index
}

// OpenRecordFile opens a RecordIO file of encoded instances.
func OpenRecordFile(path string) (*RecordFile, error) { return openRecordFile(OpenOptions{}, path) }

func openRecordFile(opts OpenOptions, path string) (*RecordFile, error) {
	if objstore.IsURL(path) {
		o, err := openObject(opts, path)
		if err != nil {
			return nil, fmt.Errorf("recordio: %w", err)
		}
		return NewRecordFile(o, o.Size(), path, o), nil
	}
	f, size, err := format.OpenFileWith(opts.Open, "recordio", path)
	if err != nil {
		return nil, err
	}
	return NewRecordFile(f, size, path, f), nil
}

// NewRecordFile reads the RecordIO data of size bytes in r; name names it
// in errors, and Close closes c (which may be nil). Fault injection reads
// files through it.
func NewRecordFile(r io.ReaderAt, size int64, name string, c io.Closer) *RecordFile {
	rf := &RecordFile{path: name, f: r, closer: c, size: size}
	rf.sc = recordio.NewScanner(r, size, recordio.ScannerOptions{Name: name})
	return rf
}

func openRecordIO(path string, opts OpenOptions) (Reader, error) {
	return openRecordFile(opts, path)
}

// Samples yields sample(0), ..., sample(n-1), for WriteRecordFile; it stops
// after the first error, which it yields.
func Samples(n int, sample func(i int) (tensor.Slots, error)) iter.Seq2[tensor.Slots, error] {
	return func(yield func(tensor.Slots, error) bool) {
		for i := range n {
			s, err := sample(i)
			if !yield(s, err) || err != nil {
				return
			}
		}
	}
}

// WriteRecordFile writes samples to a RecordIO file at path, one record
// (tensor.Encode) each, in the form RecordFile reads, and returns how many
// it wrote. The file appears complete or not at all: it is written beside
// path under a temporary name, synced, and renamed over path at the end. An
// error from samples, from encoding a sample or from the file ends the
// writing, leaves path as it was (an existing file is kept) and is
// returned, naming the file and the sample, with a count of 0. readers.All turns a Reader into
// samples, and Samples a function of the sample's index.
func WriteRecordFile(path string, opts recordio.WriterOptions, samples iter.Seq2[tensor.Slots, error]) (n int, err error) {
	fh, err := atomicfile.Create(path)
	if err != nil {
		return 0, fmt.Errorf("readers: writing %s: %w", path, err)
	}
	defer fh.Cleanup()
	w, err := recordio.NewWriter(fh, opts)
	if err != nil {
		return 0, fmt.Errorf("readers: writing %s: %w", path, err)
	}
	var rec []byte
	for s, err := range samples {
		if err == nil {
			rec, err = tensor.AppendEncode(rec[:0], s)
		}
		if err == nil {
			err = w.Write(rec)
		}
		if err != nil {
			return 0, fmt.Errorf("readers: writing %s, sample %d: %w", path, n, err)
		}
		n++
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("readers: writing %s: %w", path, err)
	}
	if err := fh.CloseAtomicallyReplace(); err != nil {
		return 0, fmt.Errorf("readers: writing %s: %w", path, err)
	}
	return n, nil
}

// Next decodes the next record. A record that is not a valid encoding is
// reported as corruption at its chunk and record.
func (r *RecordFile) Next(ctx context.Context) (tensor.Slots, error) { return r.next(ctx, nil) }

// NextStacked reads the next record onto st when it stacks (see
// tensor.Stack) and returns nil; otherwise it returns the record decoded, as
// Next does. Errors, and what SkipCorrupt does after them, are Next's. A
// file of uniform records is read so with no allocation per record.
func (r *RecordFile) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	return r.next(ctx, st)
}

func (r *RecordFile) next(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.badRec = false
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	rec := r.sc.Record()
	var item tensor.Slots
	var err error
	if st != nil {
		item, err = st.AppendEncoded(rec)
	} else {
		item, err = tensor.Decode(rec)
	}
	if item, err = validRecord(item, err); err != nil {
		return nil, r.badRecord(err)
	}
	return item, nil
}

// DecodeRecord decodes a record of a RecordIO file of instances, as
// RecordFile does: a record that is not a tensor encoding, or that does not
// hold exactly one instance, is corrupt (format.ErrCorrupt).
func DecodeRecord(rec []byte) (tensor.Slots, error) { return validRecord(tensor.Decode(rec)) }

// validRecord judges a decoded record: a decoding error is corruption, and
// a decoded record must be one instance. A nil item with no error is a
// record that went onto a tensor.Stack, whose layout is one instance
// already (a row in every slot).
func validRecord(item tensor.Slots, err error) (tensor.Slots, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: record is not a tensor encoding: %w", format.ErrCorrupt, err)
	}
	if item != nil {
		if err := oneInstance(item); err != nil {
			return nil, err
		}
	}
	return item, nil
}

// oneInstance checks that a decoded record is one instance: a record of no
// slots, of a rank-0 or [0]-shaped tensor, or of slots that disagree would
// make a batch whose ids and rows do not match.
func oneInstance(item tensor.Slots) error {
	n, err := item.Instances()
	if err != nil {
		return fmt.Errorf("%w: record is not one instance: %w", format.ErrCorrupt, err)
	}
	if n != 1 {
		return format.Corrupt("record holds %d instances; a record is one instance: a row in every slot (rank 1 or more), or one sequence", n)
	}
	return nil
}

// badRecord reports the last record scanned as corrupt, where it is, and
// lets SkipCorrupt skip it alone.
func (r *RecordFile) badRecord(err error) error {
	r.badRec = true
	pos := r.sc.Position()
	return &format.Error{Format: "recordio", File: r.path, Chunk: pos.Chunk, Record: pos.Record, Offset: pos.ChunkOffset, Err: err}
}

// SkipCorrupt gets past the corruption the last Next reported: an
// undecodable record (1 record) or damaged data, which the scanner skips
// as recordio.Scanner.SkipChunk does. A reader that sought with an index
// goes by the index instead wherever it lists the damaged chunk as sound
// (damage in flight, or since indexing: a header flipped now says nothing
// about where the records are): the records the index gives that chunk
// are lost, and reading goes on at the next chunk it lists, so that
// record numbers stay the index's. ok is false when the last error is no
// damage.
func (r *RecordFile) SkipCorrupt() (records int, ok bool) {
	if r.badRec {
		r.badRec = false
		return 1, true
	}
	fe, isFormat := errors.AsType[*format.Error](r.sc.Err())
	if r.index != nil && isFormat && errors.Is(fe, format.ErrCorrupt) {
		if c, listed := r.index.ChunkAt(fe.Offset); listed {
			if err := r.SeekIndexed(r.index, c.FirstRecord+int(c.NumRecords)); err != nil {
				return 0, false
			}
			return int(c.NumRecords), true
		}
	}
	return r.sc.SkipChunk()
}

// Seek moves to the file-wide record index rec, reading the chunk headers
// (not the payloads) to find it. Seeking to the record count is the end of
// the file.
func (r *RecordFile) Seek(rec int) error {
	if r.closed {
		return ErrClosed
	}
	x, err := r.Index()
	if err != nil {
		return err
	}
	return r.SeekIndexed(x, rec)
}

// Index reads the file's chunk index (every chunk header, no payload),
// damage listed in it (recordio.LoadIndex). An object's is a request a
// chunk, one after the other: a sound one is kept in the decode cache by
// the object's version, and the next open of that version, in this
// process or a later one, reads it back instead.
func (r *RecordFile) Index() (*recordio.Index, error) {
	o, object := r.f.(*objstore.Object)
	if !object {
		return recordio.LoadIndex(r.f, r.size, r.path)
	}
	name := objectIdentity(o) + ".recordio-index"
	// A kept index holds 32 bytes a chunk, each of 20 bytes at least.
	if b := keptBytes(name, 1<<10+2*r.size); b != nil {
		if x, err := recordio.UnmarshalIndex(b, r.size); err == nil {
			return x, nil
		}
	}
	x, err := recordio.LoadIndex(r.f, r.size, r.path)
	if err == nil {
		if b, err := x.MarshalBinary(); err == nil {
			keepBytes(name, b)
		}
	}
	return x, err
}

// SeekIndexed is Seek with an index read earlier (by Index, from the same,
// unchanged file): it reads no chunk header. A reader that reopens a file
// after an error seeks so, instead of reading every header again.
func (r *RecordFile) SeekIndexed(x *recordio.Index, rec int) error {
	if r.closed {
		return ErrClosed
	}
	r.badRec, r.index = false, x
	if rec == x.NumRecords {
		if n := len(x.Chunks); n > 0 {
			last := x.Chunks[n-1]
			r.sc.Reset(recordio.ChunkInfo{Index: n, Offset: last.End(), FirstRecord: x.NumRecords})
		}
		return nil
	}
	chunk, within, ok := x.Locate(rec)
	if !ok {
		return fmt.Errorf("readers: seek to record %d of %s: the file has %d records", rec, r.path, x.NumRecords)
	}
	r.sc.Reset(chunk)
	for range within {
		if !r.sc.Scan() {
			return fmt.Errorf("readers: seek to record %d of %s: %w", rec, r.path, r.sc.Err())
		}
	}
	return nil
}

// Size is the file's size in bytes.
func (r *RecordFile) Size() int64 { return r.size }

// Version is the version of the object read (its ETag), "" for a file.
func (r *RecordFile) Version() string { return versionOf(r.f) }

// Modified is when the object read was written, zero for a file.
func (r *RecordFile) Modified() time.Time { return modifiedOf(r.f) }

// Position is the place of the last record returned.
func (r *RecordFile) Position() recordio.Position { return r.sc.Position() }

// Reset starts over from the first record.
func (r *RecordFile) Reset() error {
	if r.closed {
		return ErrClosed
	}
	r.sc.Reset(recordio.ChunkInfo{})
	r.badRec = false
	return nil
}

// Close closes the file.
func (r *RecordFile) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.sc.Release()
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}
