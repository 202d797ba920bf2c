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
// errors as damage (ErrCorrupt). formatName and name (the file) name it
// in errors.
func GzipReader(r io.Reader, formatName, name string) (io.Reader, error) {
	zr, err := gzip.NewReader(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return nil, &Error{Format: formatName, File: name, Chunk: -1, Record: -1, Err: Corrupt("gzip: %v", err)}
	}
	return gzipErrors{zr}, nil
}

type gzipErrors struct{ r io.Reader }

func (g gzipErrors) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = Corrupt("gzip: %v", err)
	}
	return n, err
}

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
