package format

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/gzip"
)

// GzipReader reads the gzip stream in r, reporting the decompressor's
// errors as damage (ErrCorrupt) and r's own (a failed read) as they are.
// formatName and name (the file) name it in errors.
func GzipReader(r io.Reader, formatName, name string) (io.Reader, error) {
	src := &IOErrors{R: r}
	zr, err := gzip.NewReader(bufio.NewReaderSize(src, 64<<10))
	if err != nil {
		if !src.Caused(err) {
			err = Corrupt("gzip: %v", err)
		}
		return nil, &Error{Format: formatName, File: name, Chunk: -1, Record: -1, Err: err}
	}
	return gzipErrors{zr, src}, nil
}

type gzipErrors struct {
	r   io.Reader
	src *IOErrors
}

func (g gzipErrors) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !g.src.Caused(err) {
		err = Corrupt("gzip: %v", err)
	}
	return n, err
}

// IOErrors keeps the last error of the reader it wraps other than io.EOF,
// so that a decoder reading through it tells a failed read (worth a
// retry) from damage to what it read (not).
type IOErrors struct {
	R   io.Reader
	err error
}

func (e *IOErrors) Read(p []byte) (int, error) {
	n, err := e.R.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}

// Caused reports whether err is (or wraps) the last error of the reader.
func (e *IOErrors) Caused(err error) bool { return e.err != nil && errors.Is(err, e.err) }

// Gunzip writes what the gzip stream src holds to dst, checking the
// stream's checksum: at most limit bytes (limit < 0: no bound), more being
// an error. An error writing to dst is returned as it is; the others name
// formatName and the file name.
func Gunzip(dst io.Writer, src io.Reader, formatName, name string, limit int64) error {
	zr, err := GzipReader(src, formatName, name)
	if err != nil {
		return err
	}
	if limit < 0 {
		limit = math.MaxInt64 - 1
	}
	out := &ErrWriter{W: dst}
	n, err := io.Copy(out, io.LimitReader(zr, limit+1))
	switch {
	case out.Err != nil:
		return out.Err
	case err != nil:
		return &Error{Format: formatName, File: name, Chunk: -1, Record: -1, Offset: n, Err: err}
	case n > limit:
		return &Error{Format: formatName, File: name, Chunk: -1, Record: -1, Err: fmt.Errorf("more than %d bytes uncompressed", limit)}
	}
	return nil
}
