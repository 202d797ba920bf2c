package tfrecord

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/actorfeed/actorfeed/readers/format"
)

// MaxRecordBytes bounds one record: a length field may declare up to
// 2^64-1 bytes, and a record is read whole into memory.
const MaxRecordBytes = 256 << 20

// headerBytes is a record's length and the checksum of the length.
const headerBytes = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC-32C, rotated and offset, so that
// the checksum of data holding checksums is not trivially related to them.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Reader yields the records of one TFRecord file.
type Reader struct {
	name   string
	src    io.Reader
	br     *bufio.Reader
	off    int64 // where br stands in the file
	at     int64 // where the last record returned starts
	next   int   // the index of the next record
	buf    bytes.Buffer
	broken error // the framing is damaged: nothing after it can be read
}

// NewReader reads the records in r (uncompressed), which starts at record
// 0; name identifies the file in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, src: r, br: bufio.NewReaderSize(r, 64<<10)}
}

// NewGzipReader reads the gzip'd file in r; name identifies it in errors.
func NewGzipReader(r io.Reader, name string) (*Reader, error) {
	zr, err := format.GzipReader(r, "tfrecord", name)
	if err != nil {
		return nil, err
	}
	return NewReader(zr, name), nil
}

// Decode writes the records inside the gzip'd file src to dst
// (format.Gunzip).
func Decode(dst io.Writer, src io.Reader, name string, limit int64) error {
	return format.Gunzip(dst, src, "tfrecord", name, limit)
}

// Next returns the next record's data, valid until the next call, or
// io.EOF after the last. After a record whose data fails its checksum the
// reader stands at the next record; after damage to the framing (a length
// that fails its checksum, a file cut short) every call returns that error.
func (r *Reader) Next() ([]byte, error) {
	n, err := r.header()
	if err != nil {
		return nil, err
	}
	r.buf.Reset()
	// The buffer grows as data arrives: a length the file does not hold
	// costs no more than the bytes there are.
	got, err := r.buf.ReadFrom(io.LimitReader(r.br, int64(n)+4))
	r.off += got
	if err == nil && got < int64(n)+4 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, r.breaks(cutOff(err))
	}
	idx := r.next
	r.next++
	data := r.buf.Bytes()[:n]
	if want, got := binary.LittleEndian.Uint32(r.buf.Bytes()[n:]), maskedCRC(data); want != got {
		return nil, r.fail(idx, r.at, format.Corrupt("data checksum %08x, the record says %08x", got, want))
	}
	return data, nil
}

// Skip passes over the next record without checking its data (seeking
// over it when the source can seek).
func (r *Reader) Skip() error {
	n, err := r.header()
	if err != nil {
		return err
	}
	if err := r.discard(int64(n) + 4); err != nil {
		return r.breaks(cutOff(err))
	}
	r.next++
	return nil
}

// cutOff is err reading a record's data: the file ends too soon (damage),
// or a read failed (not damage: a retry may get past it).
func cutOff(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return format.Truncated("data cut off: %v", err)
	}
	return err
}

// header reads the next record's length and checks it.
func (r *Reader) header() (uint64, error) {
	if r.broken != nil {
		return 0, r.broken
	}
	r.at = r.off
	var h [headerBytes]byte
	got, err := io.ReadFull(r.br, h[:])
	r.off += int64(got)
	switch {
	case errors.Is(err, io.EOF):
		return 0, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 0, r.breaks(format.Truncated("a record header of %d bytes, want %d", got, headerBytes))
	case err != nil:
		return 0, r.breaks(err)
	}
	n := binary.LittleEndian.Uint64(h[:8])
	if want, got := binary.LittleEndian.Uint32(h[8:]), maskedCRC(h[:8]); want != got {
		return 0, r.breaks(format.Corrupt("length checksum %08x, the record says %08x", got, want))
	}
	if n > MaxRecordBytes {
		return 0, r.breaks(format.Corrupt("a record of %d bytes, more than one may hold (%d)", n, MaxRecordBytes))
	}
	return n, nil
}

// discard passes over n bytes, by a seek when they are not buffered and
// the source can seek.
func (r *Reader) discard(n int64) error {
	s, ok := r.src.(io.Seeker)
	if !ok || n <= int64(r.br.Buffered()) {
		got, err := r.br.Discard(int(n))
		r.off += int64(got)
		return err
	}
	if _, err := s.Seek(r.off+n, io.SeekStart); err != nil {
		return err
	}
	r.off += n
	r.br.Reset(r.src)
	return nil
}

// Offsets reads the rest of the file's record headers, not their data,
// and returns where each record from the next one on starts. On an error
// it returns the records found before it too: after damage to the
// framing (format.ErrFraming), those are the records that can be read.
func (r *Reader) Offsets() ([]int64, error) {
	var out []int64
	for {
		at := r.off
		err := r.Skip()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, at)
	}
}

// Seek moves the reader to record n, which starts at offset off in the
// file (Offsets), by seeking the source given to NewReader, which must be
// an io.Seeker.
func (r *Reader) Seek(n int, off int64) error {
	s, ok := r.src.(io.Seeker)
	if !ok {
		return fmt.Errorf("tfrecord: %s: seek to record %d: the stream cannot seek", r.name, n)
	}
	if _, err := s.Seek(off, io.SeekStart); err != nil {
		return r.fail(n, off, err)
	}
	r.br.Reset(r.src)
	r.off, r.at, r.next, r.broken = off, off, n, nil
	return nil
}

// Index is the index of the next record.
func (r *Reader) Index() int { return r.next }

// Broken reports whether the last error was damage to the framing (as
// opposed to one record's data): nothing after it can be read in order.
func (r *Reader) Broken() bool { return r.broken != nil }

// Fail positions err at the record Next returned last.
func (r *Reader) Fail(err error) error { return r.fail(r.next-1, r.at, err) }

// breaks fails the framing: nothing after it can be read in order. Damage
// (not a failed read) matches format.ErrFraming.
func (r *Reader) breaks(err error) error {
	if errors.Is(err, format.ErrCorrupt) {
		err = format.Framing(err)
	}
	r.broken = r.fail(r.next, r.at, err)
	return r.broken
}

func (r *Reader) fail(idx int, off int64, err error) error {
	return &format.Error{Format: "tfrecord", File: r.name, Chunk: -1, Record: idx, Offset: off, Err: err}
}

// Writer writes records in TFRecord's framing.
type Writer struct {
	w   io.Writer
	hdr [headerBytes]byte
}

// NewWriter writes records to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one record.
func (w *Writer) Write(data []byte) error {
	binary.LittleEndian.PutUint64(w.hdr[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(w.hdr[8:], maskedCRC(w.hdr[:8]))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return err
	}
	if _, err := w.w.Write(data); err != nil {
		return err
	}
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], maskedCRC(data))
	_, err := w.w.Write(c[:])
	return err
}
