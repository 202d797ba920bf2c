package format

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrCorrupt is matched by errors.Is for every error that reports damaged
// data, in any format: a bad magic number, a checksum mismatch, an
// impossible length, an undecodable payload, or a file cut short.
var ErrCorrupt = errors.New("format: corrupt data")

// ErrFraming is matched, besides ErrCorrupt, by damage to a file's
// framing: a record's length that fails its checksum or goes past the
// file, a tar header that does not parse. Where the next record or member
// starts is then unknown: a reader can go on only by an index read before
// the damage, or by resynchronising, which no reader here does (nothing
// found by guessing where a record starts can be trusted). Under the skip
// policy the records before the damage are read and the rest of the file
// is listed as lost.
var ErrFraming = errors.New("format: damaged framing")

// Framing marks err, damage to a file's framing, as matching ErrFraming;
// its message is err's.
func Framing(err error) error { return framingError{err} }

type framingError struct{ error }

func (e framingError) Unwrap() []error { return []error{e.error, ErrFraming} }

// Error locates a failure in a file. It wraps its cause, so errors.Is sees
// through it to ErrCorrupt, io.ErrUnexpectedEOF or an I/O error.
type Error struct {
	Format string // format name, e.g. "recordio"
	File   string // path as given by the caller; may be empty for streams
	Chunk  int    // chunk index, -1 if the format has none or it is unknown
	Record int    // record index within the file, -1 if unknown
	Offset int64  // byte offset in the file where the failing unit starts, -1 if unknown
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Format)
	b.WriteString(": ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if at := e.Where(); at != "" {
		b.WriteString(at)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Where is where in its file the failure is, "chunk 2, offset 968969";
// "" when that is unknown.
func (e *Error) Where() string {
	var at []string
	if e.Chunk >= 0 {
		at = append(at, fmt.Sprintf("chunk %d", e.Chunk))
	}
	if e.Record >= 0 {
		at = append(at, fmt.Sprintf("record %d", e.Record))
	}
	if e.Offset >= 0 {
		at = append(at, fmt.Sprintf("offset %d", e.Offset))
	}
	return strings.Join(at, ", ")
}

func (e *Error) Unwrap() error { return e.Err }

// Corrupt returns an error that matches ErrCorrupt, with a message.
func Corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Truncated returns an error for data that ends in the middle of a unit: it
// matches both io.ErrUnexpectedEOF and ErrCorrupt, since a cut-off file is
// damaged data.
func Truncated(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", io.ErrUnexpectedEOF, ErrCorrupt, fmt.Sprintf(format, args...))
}

// BadSamples is a map's error for samples of its batch whose data it could
// not read (an image that does not decode), returned together with a
// result that still holds every sample: Rows are their rows in the batch,
// ascending, and Errs the error of each, naming its sample. Under the skip
// policy a pipeline drops those rows from the result and counts them as
// skipped; otherwise it fails with the error. Each of Errs matches
// ErrCorrupt.
type BadSamples struct {
	Rows []int
	Errs []error
}

func (e *BadSamples) Error() string {
	if len(e.Errs) == 0 {
		return "format: no bad samples"
	}
	if len(e.Errs) == 1 {
		return e.Errs[0].Error()
	}
	return fmt.Sprintf("%v (and %d more samples of the batch)", e.Errs[0], len(e.Errs)-1)
}

func (e *BadSamples) Unwrap() []error { return e.Errs }
