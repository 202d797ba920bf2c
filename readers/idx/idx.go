package idx

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs
// the Fashion-MNIST files.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// maxDeflateRatio bounds how far deflate can expand its input (the format's
// limit is about 1032:1), so a gzip file's declared size can be checked
// against its compressed size before any allocation.
const maxDeflateRatio = 1100

var typeCodes = map[byte]tensor.DType{
	0x08: tensor.Uint8,
	0x09: tensor.Int8,
	0x0B: tensor.Int16,
	0x0C: tensor.Int32,
	0x0D: tensor.Float32,
	0x0E: tensor.Float64,
}

// Header describes an IDX file.
type Header struct {
	DType tensor.DType
	Dims  []int // Dims[0] is the number of samples
	Size  int   // header size in bytes
}

// Samples is the number of samples the file declares.
func (h Header) Samples() int { return h.Dims[0] }

// SampleShape is the shape of one sample as Reader yields it: [1, Dims[1:]...].
func (h Header) SampleShape() tensor.Shape {
	return append(tensor.Shape{1}, h.Dims[1:]...)
}

func (h Header) sampleBytes() int {
	return tensor.Shape(h.Dims[1:]).NumElements() * h.DType.Size()
}

// Bytes is the size of the whole file the header declares, uncompressed.
func (h Header) Bytes() int64 { return int64(h.Size) + int64(h.Samples())*int64(h.sampleBytes()) }

// ParseHeader reads an IDX header from the start of an (uncompressed)
// stream. limit bounds the data size the header may declare (for example
// the bytes left in the file); pass -1 for no bound.
func ParseHeader(r io.Reader, limit int64) (Header, error) {
	var fixed [4]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return Header{}, headerErr(err, 0, "magic")
	}
	if fixed[0] != 0 || fixed[1] != 0 {
		return Header{}, format.Corrupt("bad magic % x: the first two bytes must be zero", fixed[:])
	}
	dt, ok := typeCodes[fixed[2]]
	if !ok {
		return Header{}, format.Corrupt("unknown element type code %#02x", fixed[2])
	}
	nd := int(fixed[3])
	if nd < 1 || nd > tensor.MaxRank {
		return Header{}, format.Corrupt("%d dimensions, want 1..%d", nd, tensor.MaxRank)
	}
	raw := make([]byte, 4*nd)
	if _, err := io.ReadFull(r, raw); err != nil {
		return Header{}, headerErr(err, 4, "dimensions")
	}
	h := Header{DType: dt, Dims: make([]int, nd), Size: 4 + 4*nd}
	total := int64(dt.Size())
	for i := range h.Dims {
		d := binary.BigEndian.Uint32(raw[4*i:])
		h.Dims[i] = int(d)
		if d != 0 && total > (1<<48)/int64(d) {
			return Header{}, format.Corrupt("dimensions %v declare more than 2^48 bytes", h.Dims[:i+1])
		}
		total *= int64(d)
	}
	if h.Dims[0] > 0 && h.sampleBytes() == 0 {
		// Legal in principle, but a count of empty samples is never real
		// data, and a huge one would keep a reader busy yielding nothing.
		return Header{}, format.Corrupt("dimensions %v make every sample empty", h.Dims)
	}
	if limit >= 0 && total > limit {
		return Header{}, format.Truncated("header declares %d data bytes, at most %d can follow", total, limit)
	}
	return h, nil
}

func headerErr(err error, off int, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return format.Truncated("header %s cut off at byte %d", what, off)
	}
	return fmt.Errorf("read header: %w", err)
}

// Reader yields the samples of one IDX file.
type Reader struct {
	name    string
	src     io.Reader // what r reads: the file, or its decompressor
	r       *bufio.Reader
	closer  io.Closer
	header  Header
	next    int // index of the next sample
	gzipped bool
	ended   bool // the end of the stream was checked
	buf     bytes.Buffer
}

// Open opens an IDX file, raw or gzipped.
func Open(path string) (*Reader, error) { return OpenWith(nil, path) }

// OpenWith is Open opening the file with open (os.OpenFile when nil).
func OpenWith(open format.Opener, path string) (*Reader, error) {
	return OpenNamed(open, path, path)
}

// OpenNamed is OpenWith naming the file name in errors: path is a copy of
// it (an uncompressed one, say).
func OpenNamed(open format.Opener, path, name string) (*Reader, error) {
	f, size, err := format.OpenFileWith(open, "idx", path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f, size, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads an IDX stream of size bytes (-1 if unknown) from r; name
// identifies it in errors.
func NewReader(r io.Reader, size int64, name string) (*Reader, error) {
	src := r
	br := bufio.NewReaderSize(r, 64<<10)
	limit := int64(-1)
	gzipped := false
	if IsGzip(br) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fail(name, 0, format.Corrupt("gzip: %v", err))
		}
		src = zr
		br = bufio.NewReaderSize(zr, 64<<10)
		gzipped = true
		if size >= 0 {
			limit = size * maxDeflateRatio
		}
	} else if size >= 0 {
		limit = size
	}
	h, err := ParseHeader(br, limit)
	if err != nil {
		if gzipped && !errors.Is(err, format.ErrCorrupt) {
			err = fmt.Errorf("%w: gzip: %w", format.ErrCorrupt, err)
		}
		return nil, fail(name, 0, err)
	}
	if limit >= 0 && limit == size { // raw: the size must be exact
		want := int64(h.Size) + int64(h.Samples())*int64(h.sampleBytes())
		if want < size {
			return nil, fail(name, want, format.Corrupt("%d bytes after the %d declared samples", size-want, h.Samples()))
		}
		if want > size {
			return nil, fail(name, size, format.Truncated("file has %d bytes, header declares %d", size, want))
		}
	}
	return &Reader{name: name, src: src, r: br, header: h, gzipped: gzipped}, nil
}

// IsGzip reports whether the stream br starts with gzip's magic bytes.
func IsGzip(br *bufio.Reader) bool {
	magic, _ := br.Peek(2)
	return len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
}

// Gzipped reports whether the file is gzip-compressed.
func (r *Reader) Gzipped() bool { return r.gzipped }

// Seek moves the reader to sample n, 0 <= n <= Samples(). A raw file
// opened by Open seeks to it; a gzip stream has no way back, so it is read
// forward to n, which must not be before the next sample.
func (r *Reader) Seek(n int) error {
	h := r.header
	if n < 0 || n > h.Samples() {
		return fail(r.name, 0, fmt.Errorf("seek to sample %d of %d", n, h.Samples()))
	}
	size := int64(h.sampleBytes())
	if s, ok := r.src.(io.Seeker); ok && !r.gzipped {
		if _, err := s.Seek(int64(h.Size)+int64(n)*size, io.SeekStart); err != nil {
			return fail(r.name, int64(h.Size)+int64(n)*size, err)
		}
		r.r.Reset(r.src)
		r.next, r.ended = n, false
		return nil
	}
	if n < r.next {
		return fail(r.name, 0, fmt.Errorf("seek back to sample %d from %d in a stream", n, r.next))
	}
	off := int64(h.Size) + int64(r.next)*size
	if _, err := io.CopyN(io.Discard, r.r, int64(n-r.next)*size); err != nil {
		return &format.Error{Format: "idx", File: r.name, Chunk: -1, Record: r.next, Offset: off, Err: r.readErr(err)}
	}
	r.next = n
	return nil
}

func fail(name string, off int64, err error) error {
	return &format.Error{Format: "idx", File: name, Chunk: -1, Record: -1, Offset: off, Err: err}
}

// Header describes the file.
func (r *Reader) Header() Header { return r.header }

// Next returns the next sample as a tensor of shape Header().SampleShape(),
// or io.EOF after the last declared sample.
func (r *Reader) Next() (tensor.Tensor, error) {
	h := r.header
	if r.next >= h.Samples() {
		return tensor.Tensor{}, r.atEnd()
	}
	n := h.sampleBytes()
	off := int64(h.Size) + int64(r.next)*int64(n)
	// CopyN grows the buffer as data arrives, so a sample size the header
	// exaggerates costs no more memory than the data actually present.
	r.buf.Reset()
	if _, err := io.CopyN(&r.buf, r.r, int64(n)); err != nil {
		return tensor.Tensor{}, &format.Error{Format: "idx", File: r.name, Chunk: -1, Record: r.next, Offset: off, Err: r.readErr(err)}
	}
	t, err := tensor.Zeros(h.DType, h.SampleShape())
	if err != nil {
		return tensor.Tensor{}, fail(r.name, off, err)
	}
	toLittleEndian(t.Bytes(), r.buf.Bytes(), h.DType.Size())
	r.next++
	return t, nil
}

// SampleAt reads sample n by its offset in a raw file (pread: through the
// page cache, the reader staying where it is; safe for concurrent use with
// other SampleAt calls), as Next would return it. A gzip stream cannot be
// read by position: it fails.
func (r *Reader) SampleAt(n int) (tensor.Tensor, error) {
	t, err := tensor.Zeros(r.header.DType, r.header.SampleShape())
	if err != nil {
		return tensor.Tensor{}, fail(r.name, 0, err)
	}
	return r.SampleInto(n, t.Bytes())
}

// SampleBytes is the size of a sample: what SampleInto reads into.
func (r *Reader) SampleBytes() int { return r.header.sampleBytes() }

// SampleInto is SampleAt reading into dst, of SampleBytes bytes, which the
// tensor it returns wraps: a reader that gathers many samples into memory
// of its own allocates nothing a sample. dst must be aligned for the file's
// type where a typed view of the tensor is taken (tensor.View).
func (r *Reader) SampleInto(n int, dst []byte) (tensor.Tensor, error) {
	h := r.header
	at, ok := r.src.(io.ReaderAt)
	switch {
	case r.gzipped || !ok:
		return tensor.Tensor{}, fail(r.name, 0, fmt.Errorf("sample %d: a gzip stream cannot be read by position", n))
	case n < 0 || n >= h.Samples():
		return tensor.Tensor{}, fail(r.name, 0, fmt.Errorf("no sample %d of %d", n, h.Samples()))
	case len(dst) != h.sampleBytes():
		return tensor.Tensor{}, fail(r.name, 0, fmt.Errorf("sample %d: %d bytes to read it into, want %d", n, len(dst), h.sampleBytes()))
	}
	off := int64(h.Size) + int64(n)*int64(h.sampleBytes())
	if _, err := at.ReadAt(dst, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = format.Truncated("sample %d of %d cut off", n, h.Samples())
		}
		return tensor.Tensor{}, &format.Error{Format: "idx", File: r.name, Chunk: -1, Record: n, Offset: off, Err: err}
	}
	if size := h.DType.Size(); size > 1 {
		for i := 0; i+size <= len(dst); i += size {
			slices.Reverse(dst[i : i+size])
		}
	}
	return tensor.WrapBytes(h.DType, h.SampleShape(), dst)
}

// readErr classifies a failure to read sample r.next's bytes.
func (r *Reader) readErr(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return format.Truncated("sample %d of %d cut off", r.next, r.header.Samples())
	case r.gzipped:
		// Anything the decompressor reports is damage to the stream.
		return fmt.Errorf("%w: sample %d: gzip: %w", format.ErrCorrupt, r.next, err)
	}
	return err
}

// atEnd checks, once, that the stream ends with the last declared sample:
// bytes after it are corruption in a gzipped file as in a raw one (whose
// size NewReader checked), and reading to the end of a gzip stream is what
// verifies its checksum.
func (r *Reader) atEnd() error {
	if r.ended {
		return io.EOF
	}
	off := int64(r.header.Size) + int64(r.next)*int64(r.header.sampleBytes())
	_, err := r.r.ReadByte()
	switch {
	case err == nil:
		return fail(r.name, off, format.Corrupt("bytes after the %d declared samples", r.header.Samples()))
	case !errors.Is(err, io.EOF):
		return fail(r.name, off, fmt.Errorf("%w: after the last sample: %w", format.ErrCorrupt, err))
	}
	r.ended = true
	return io.EOF
}

// toLittleEndian copies big-endian elements of the given size into dst.
func toLittleEndian(dst, src []byte, size int) {
	if size == 1 {
		copy(dst, src)
		return
	}
	for i := 0; i+size <= len(src); i += size {
		for k := range size {
			dst[i+k] = src[i+size-1-k]
		}
	}
}

// Close closes the file opened by Open.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.closer = nil
	return err
}

// CompanionLabels returns the labels file that goes with an images file by
// the MNIST naming convention ("...images-idx3-ubyte[.gz]" ->
// "...labels-idx1-ubyte[.gz]"), and whether anything has that name: a
// named pipe, a device or a dangling link there is the labels file too,
// which then fails to open, naming it (taking the images alone would
// have made a data set without labels and said nothing).
func CompanionLabels(imagesPath string) (string, bool) {
	dir, base := filepath.Split(imagesPath)
	if !strings.Contains(base, "images-idx3") {
		return "", false
	}
	p := filepath.Join(dir, strings.Replace(base, "images-idx3", "labels-idx1", 1))
	if _, err := os.Lstat(p); err == nil {
		return p, true
	}
	return "", false
}

// Pair reads an images file and a labels file in lockstep.
type Pair struct {
	Images, Labels *Reader
}

// OpenPair opens both files and checks that they declare the same number of
// samples.
func OpenPair(images, labels string) (*Pair, error) { return OpenPairWith(nil, images, labels) }

// OpenPairWith is OpenPair opening the files with open (os.OpenFile when
// nil).
func OpenPairWith(open format.Opener, images, labels string) (*Pair, error) {
	im, err := OpenWith(open, images)
	if err != nil {
		return nil, err
	}
	lb, err := OpenWith(open, labels)
	if err != nil {
		im.Close()
		return nil, err
	}
	if a, b := im.Header().Samples(), lb.Header().Samples(); a != b {
		im.Close()
		lb.Close()
		return nil, fail(labels, 0, format.Corrupt("%d labels for %d images in %s", b, a, images))
	}
	return &Pair{Images: im, Labels: lb}, nil
}

// Next returns the next (image, label) sample, or io.EOF.
func (p *Pair) Next() (image, label tensor.Tensor, err error) {
	if image, err = p.Images.Next(); err != nil {
		return
	}
	label, err = p.Labels.Next()
	return
}

// Seek moves both files to sample n (Reader.Seek).
func (p *Pair) Seek(n int) error {
	if err := p.Images.Seek(n); err != nil {
		return err
	}
	return p.Labels.Seek(n)
}

// Close closes both files.
func (p *Pair) Close() error {
	return errors.Join(p.Images.Close(), p.Labels.Close())
}

// Decode writes the uncompressed bytes of the gzip'd IDX stream src (size
// compressed bytes, -1 if unknown) to dst and returns its header, checked
// as Reader checks it: the header's data must fit limit bytes (limit < 0:
// deflate's largest expansion of size) and be all there is, and the
// stream's checksum must hold. name identifies the stream in errors. An
// error writing to dst is returned as it is, not as damage to the stream.
func Decode(dst io.Writer, src io.Reader, size int64, name string, limit int64) (Header, error) {
	zr, err := gzip.NewReader(bufio.NewReaderSize(src, 64<<10))
	if err != nil {
		return Header{}, fail(name, 0, format.Corrupt("gzip: %v", err))
	}
	if size >= 0 && (limit < 0 || limit > size*maxDeflateRatio) {
		limit = size * maxDeflateRatio
	}
	out := &format.ErrWriter{W: dst}
	br := bufio.NewReaderSize(io.TeeReader(zr, out), 64<<10)
	h, err := ParseHeader(br, limit)
	if out.Err != nil {
		return Header{}, out.Err
	}
	if err != nil {
		if !errors.Is(err, format.ErrCorrupt) {
			err = fmt.Errorf("%w: gzip: %w", format.ErrCorrupt, err)
		}
		return Header{}, fail(name, 0, err)
	}
	r := &Reader{name: name, r: br, header: h, gzipped: true}
	err = r.Seek(h.Samples())
	if err == nil {
		if err = r.atEnd(); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if out.Err != nil {
		return Header{}, out.Err
	}
	return h, err
}
