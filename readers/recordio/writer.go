package recordio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
)

// ErrWriterClosed is returned by Write and Flush after Close.
var ErrWriterClosed = errors.New("recordio: writer closed")

// WriterOptions configure a Writer. The zero value is valid.
type WriterOptions struct {
	// Compressor for every chunk. Default NoCompression.
	Compressor Compressor
	// MaxChunkBytes bounds the record bytes of one chunk; a record larger
	// than it gets a chunk of its own. Default DefaultMaxChunkBytes.
	MaxChunkBytes int
	// NoMarkers leaves out the begin marker and the trailer (marker.go) that
	// let a reader prove the file is whole. Default false: they are
	// written, and Paddle's reader skips them.
	NoMarkers bool
}

// Writer appends records to a RecordIO stream, one chunk at a time.
type Writer struct {
	w      io.Writer
	opts   WriterOptions
	raw    []byte // pending chunk: length-prefixed records
	count  uint32 // records in raw
	packed bytes.Buffer
	hdr    []byte
	snappy *snappy.Writer
	gzip   *gzip.Writer
	closed bool
	begun  bool // the begin marker is written

	records, chunks int
}

// NewWriter returns a Writer that writes to w. It fails only for an
// unknown compressor or a negative chunk size.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if opts.Compressor > Gzip {
		return nil, fmt.Errorf("%w: %d", ErrUnknownCompressor, uint32(opts.Compressor))
	}
	if opts.MaxChunkBytes < 0 {
		return nil, fmt.Errorf("recordio: MaxChunkBytes %d is negative", opts.MaxChunkBytes)
	}
	if opts.MaxChunkBytes == 0 {
		opts.MaxChunkBytes = DefaultMaxChunkBytes
	}
	return &Writer{w: w, opts: opts}, nil
}

// Write appends one record. The record is copied; it may be reused.
func (w *Writer) Write(record []byte) error {
	if w.closed {
		return ErrWriterClosed
	}
	if uint64(len(record)) > 1<<32-1 {
		return fmt.Errorf("recordio: record of %d bytes exceeds the format's 4 GiB limit", len(record))
	}
	if w.count > 0 && len(w.raw)+4+len(record) > w.opts.MaxChunkBytes {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	w.raw = binary.LittleEndian.AppendUint32(w.raw, uint32(len(record)))
	w.raw = append(w.raw, record...)
	w.count++
	w.records++
	return nil
}

// Flush ends the current chunk and writes it out. Flushing with no pending
// record writes nothing.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrWriterClosed
	}
	if w.count == 0 {
		return nil
	}
	payload, err := w.compress()
	if err != nil {
		return err
	}
	if uint64(len(payload)) > 1<<32-1 {
		return fmt.Errorf("recordio: chunk of %d bytes exceeds the format's 4 GiB limit", len(payload))
	}
	h := Header{
		Checksum:   crc32.ChecksumIEEE(payload),
		Compressor: w.opts.Compressor,
		StoredSize: uint32(len(payload)),
		NumRecords: w.count,
	}
	if err := w.begin(); err != nil {
		return err
	}
	w.hdr = h.append(w.hdr[:0])
	if _, err := w.w.Write(w.hdr); err != nil {
		return fmt.Errorf("recordio: write chunk %d header: %w", w.chunks, err)
	}
	if _, err := w.w.Write(payload); err != nil {
		return fmt.Errorf("recordio: write chunk %d: %w", w.chunks, err)
	}
	w.raw = w.raw[:0]
	w.count = 0
	w.chunks++
	return nil
}

func (w *Writer) compress() ([]byte, error) {
	if w.opts.Compressor == NoCompression {
		return w.raw, nil
	}
	w.packed.Reset()
	var zw io.WriteCloser
	switch w.opts.Compressor {
	case Snappy:
		if w.snappy == nil {
			w.snappy = snappy.NewBufferedWriter(&w.packed)
		} else {
			w.snappy.Reset(&w.packed)
		}
		zw = w.snappy
	case Gzip:
		if w.gzip == nil {
			w.gzip = gzip.NewWriter(&w.packed)
		} else {
			w.gzip.Reset(&w.packed)
		}
		zw = w.gzip
	}
	if _, err := zw.Write(w.raw); err != nil {
		return nil, fmt.Errorf("recordio: compress chunk %d: %w", w.chunks, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("recordio: compress chunk %d: %w", w.chunks, err)
	}
	return w.packed.Bytes(), nil
}

// begin writes the begin marker before the first chunk.
func (w *Writer) begin() error {
	if w.begun || w.opts.NoMarkers {
		return nil
	}
	w.begun = true
	if _, err := w.w.Write(marker{kind: beginMarker}.chunk()); err != nil {
		return fmt.Errorf("recordio: write the begin marker: %w", err)
	}
	return nil
}

// Close flushes the last chunk and writes the trailer. It does not close
// the underlying writer. Closing twice is a no-op.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	err := w.Flush()
	if err == nil {
		err = w.begin()
	}
	if err == nil && !w.opts.NoMarkers {
		end := marker{kind: endMarker, chunks: uint64(w.chunks), records: uint64(w.records)}
		if _, werr := w.w.Write(end.chunk()); werr != nil {
			err = fmt.Errorf("recordio: write the trailer: %w", werr)
		}
	}
	w.closed = true
	return err
}

// Records is the number of records written so far.
func (w *Writer) Records() int { return w.records }

// Chunks is the number of chunks flushed so far.
func (w *Writer) Chunks() int { return w.chunks }
