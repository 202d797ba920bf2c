package wds

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// MaxMemberBytes bounds one member of a shard: a header may declare up to
// 8 GiB, and a member is read whole into memory.
const MaxMemberBytes = 256 << 20

// block is tar's unit: every header starts at a multiple of it.
const block = 512

// Reader yields the samples of one shard.
type Reader struct {
	name   string
	src    *counter
	tr     *tar.Reader
	fields []string // the first sample's field names, sorted: the slots
	look   *member  // the next sample's first member, read ahead
	next   int      // the index of the next sample
	hdr    int64    // where the next header starts
	broken error    // the tar stream is damaged: nothing after it can be read
}

// member is one field of a sample as read.
type member struct {
	name, key, ext string
	off            int64 // of its header in the tar stream
	start          int64 // of its data
	size           int64
	data           []byte // nil until read
	read           bool   // data was read (a Skip reads none)
	// sparse is a sparse file's member: its data does not lie at start
	// in the shard (a hole reads as zeros), so tar reads it, even for a
	// Skip.
	sparse bool
}

// NewReader reads the shard in r (uncompressed tar), which starts at
// sample 0; name identifies it in errors.
func NewReader(r io.Reader, name string) *Reader {
	c := &counter{r: r}
	return &Reader{name: name, src: c, tr: tar.NewReader(c)}
}

// Fields are the field names of the shard's samples, sorted; nil until
// the first sample is read.
func (r *Reader) Fields() []string { return r.fields }

// Next returns the next sample's key and fields, or io.EOF after the last.
// After an error in a field's data the reader stands at the next sample;
// after damage to the tar stream itself every call returns that error.
func (r *Reader) Next() (key string, slots tensor.Slots, err error) {
	members, err := r.sample(true)
	if err != nil {
		return "", nil, err
	}
	idx := r.next
	r.next++
	slots, err = r.decode(idx, members)
	return members[0].key, slots, err
}

// Skip passes over the next sample without reading its fields' data
// (seeking over them when the stream can seek).
func (r *Reader) Skip() error {
	_, err := r.sample(false)
	if err == nil {
		r.next++
	}
	return err
}

// Offsets reads the rest of the shard's headers, not their data, and
// returns where each sample from the next one on starts: the offset of
// its first member's header. On an error, those located before it too.
func (r *Reader) Offsets() ([]int64, error) {
	sp, err := r.Spans()
	return sp.Starts(), err
}

// Seek moves the reader to sample n, whose first header is at offset off
// in the shard (Offsets), by seeking the source given to NewReader, which
// must be an io.Seeker.
func (r *Reader) Seek(n int, off int64) error {
	s, ok := r.src.r.(io.Seeker)
	if !ok {
		return fmt.Errorf("wds: %s: seek to sample %d: the stream cannot seek", r.name, n)
	}
	if _, err := s.Seek(off, io.SeekStart); err != nil {
		return r.fail(n, "", off, err)
	}
	r.src.reset(off)
	r.hdr = off
	r.tr = tar.NewReader(r.src)
	r.look, r.next, r.broken = nil, n, nil
	return nil
}

// Broken reports whether the last error was damage to the tar stream (as
// opposed to one field's data): nothing after it can be read in order.
func (r *Reader) Broken() bool { return r.broken != nil }

// Index is the index of the next sample.
func (r *Reader) Index() int { return r.next }

// sample reads the next sample's members, their data too when read.
func (r *Reader) sample(read bool) ([]*member, error) {
	if r.broken != nil {
		return nil, r.broken
	}
	first := r.look
	r.look = nil
	if first != nil && read && !first.read {
		// Read ahead by a Skip, which reads no data: the tar reader still
		// stands at it, since nothing was read after it.
		if err := r.readData(first); err != nil {
			return nil, err
		}
	}
	if first == nil {
		m, err := r.member(read)
		if err != nil {
			return nil, err
		}
		first = m
	}
	members := []*member{first}
	for {
		m, err := r.member(read)
		if errors.Is(err, io.EOF) {
			return members, nil
		}
		if err != nil {
			return nil, err
		}
		if m.key != first.key {
			r.look = m
			return members, nil
		}
		members = append(members, m)
	}
}

// member reads the next member that is a field: its header, and its data
// when read.
func (r *Reader) member(read bool) (*member, error) {
	for {
		at := r.hdr
		r.src.recordFrom(at)
		h, err := r.tr.Next()
		r.src.stopRecording()
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if err != nil {
			if !r.src.failed(err) {
				err = format.Framing(format.Corrupt("tar: %v", err))
			}
			r.broken = r.fail(r.next, "", at, err)
			return nil, r.broken
		}
		// tar reads headers exactly: the data starts here (r.src.n), and
		// the next header after its last block.
		r.hdr = (r.src.n + dataSize(h) + block - 1) / block * block
		key, ext, ok := split(h.Name)
		isField := ok && (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeCont || h.Typeflag == tar.TypeGNUSparse)
		sparse := isSparse(h)
		if err := r.tarfileAgrees(h); err != nil {
			r.broken = r.fail(r.next, h.Name, at, format.Framing(err))
			return nil, r.broken
		}
		if !isField && !sparse {
			continue
		}
		m := &member{name: h.Name, key: key, ext: ext, off: at, start: r.src.n, size: h.Size, sparse: sparse}
		if h.Size > MaxMemberBytes {
			r.broken = r.fail(r.next, h.Name, at, format.Framing(format.Corrupt("%d bytes, more than a member may hold (%d)", h.Size, MaxMemberBytes)))
			return nil, r.broken
		}
		if sparse {
			// A sparse member's data in the shard is its map and its
			// fragments, not its logical size: where the next header lies
			// is known once tar has read them, and a span cannot read it.
			if err := r.readData(m); err != nil {
				return nil, err
			}
			r.hdr = (r.src.n + block - 1) / block * block
		}
		if !isField {
			continue
		}
		if read && !m.read {
			if err := r.readData(m); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
}

// isSparse says whether tar reads h's member as a sparse file, as
// tar.Reader decides it: the old GNU type, or PAX records of a GNU sparse
// version it knows (0.0, 0.1 and 1.0). Python's tarfile and GNU tar read
// these formats too, holes as zeros.
func isSparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	major, minor := h.PAXRecords["GNU.sparse.major"], h.PAXRecords["GNU.sparse.minor"]
	switch {
	case major == "0" && (minor == "0" || minor == "1"), major == "1" && minor == "0":
		return true
	case major != "" || minor != "":
		return false
	}
	return h.PAXRecords["GNU.sparse.map"] != ""
}

// readData reads m's data, the tar reader standing at m.
func (r *Reader) readData(m *member) error {
	// ReadAll grows as data arrives: a size the header overstates costs no
	// more than the bytes there are. A sparse member's holes arrive as
	// zeros without bytes: they are bounded by what the member takes in
	// the shard (sparseBound).
	var src io.Reader = r.tr
	if m.sparse {
		src = &sparseBound{r: r.tr, src: r.src, from: m.off}
	}
	var err error
	m.data, err = io.ReadAll(io.LimitReader(src, m.size))
	if err == nil && int64(len(m.data)) < m.size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !r.src.failed(err) && !errors.Is(err, format.ErrCorrupt) {
		err = format.Framing(format.Truncated("data cut off: %v", err))
	}
	if err != nil {
		r.broken = r.fail(r.next, m.name, m.off, err)
		return r.broken
	}
	m.read = true
	return nil
}

// MaxSparseExpansion bounds a sparse member: its file may hold at most
// this many times the bytes it takes in the shard (its headers, map and
// data), and 64 KiB more. Its holes read as zeros that no byte of the
// shard pays for: unbounded, a shard of a few KiB would ask for
// MaxMemberBytes a sample.
const MaxSparseExpansion = 64

// errSparseBomb is a sparse member past MaxSparseExpansion. It is damage
// to the shard's framing: the tar reader stops inside the member, so where
// the next one starts is unknown.
var errSparseBomb = format.Framing(format.Corrupt("a sparse file of more than %d times the bytes it takes in the shard", MaxSparseExpansion))

// sparseBound fails a sparse member's read once it has handed out more
// than MaxSparseExpansion times the shard's bytes read since from.
type sparseBound struct {
	r    io.Reader
	src  *counter
	from int64
	out  int64
}

func (s *sparseBound) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.out += int64(n)
	if s.out > MaxSparseExpansion*(s.src.n-s.from)+64<<10 {
		return n, errSparseBomb
	}
	return n, err
}

// dataSize is what tar reads of a member's data: none for the types that
// are a header only, whatever their size field says.
func dataSize(h *tar.Header) int64 {
	switch h.Typeflag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return 0
	}
	return max(h.Size, 0)
}

// split cuts a member's name into its key and its extension, lower-cased,
// as the webdataset library's base_plus_ext does by the pattern
// ^((?:.*/|)[^.]+)[.]([^/]*)$: the key is the path up to the first dot of
// the file's name, the extension the rest (perhaps empty). A file's name
// that starts with a dot belongs, whole, to the key of its directory
// (d/x/.hidden: key "d/x/", field "hidden") when the directory's name
// has no dot; otherwise, and without a dot, it is no field. Like the
// pattern's ".", the part before a key's last slash holds no newline.
func split(name string) (key, ext string, ok bool) {
	last := strings.LastIndexByte(name, '/')
	newline := strings.IndexByte(name, '\n')
	// The key ends in a slash s (the latest that works) followed by a run
	// without dots, or (s = -1) is such a run from the start; its dot must
	// lie past the last slash.
	for s := last; ; {
		if s < 0 || newline < 0 || newline > s {
			dot := strings.IndexByte(name[s+1:], '.')
			if dot > 0 && s+1+dot > last {
				return name[:s+1+dot], strings.ToLower(name[s+2+dot:]), true
			}
		}
		if s < 0 {
			return "", "", false
		}
		prev := strings.LastIndexByte(name[:s], '/')
		if strings.IndexByte(name[prev+1:s], '.') >= 0 {
			return "", "", false // every earlier run holds that dot
		}
		s = prev
	}
}

// decode makes sample idx's slots from its members.
func (r *Reader) decode(idx int, members []*member) (tensor.Slots, error) {
	slices.SortFunc(members, func(a, b *member) int { return strings.Compare(a.ext, b.ext) })
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.ext
		if i > 0 && names[i-1] == m.ext {
			return nil, r.fail(idx, m.name, m.off, format.Corrupt("sample %s has two %s fields", m.key, m.ext))
		}
	}
	if r.fields == nil {
		r.fields = names
	} else if !slices.Equal(r.fields, names) {
		return nil, r.fail(idx, members[0].name, members[0].off,
			format.Corrupt("sample %s has the fields %v, the shard's first %v", members[0].key, names, r.fields))
	}
	slots := make(tensor.Slots, len(members))
	for i, m := range members {
		t, err := field(m.ext, m.data)
		if err != nil {
			return nil, r.fail(idx, m.name, m.off, err)
		}
		slots[i] = t
	}
	return slots, nil
}

// field makes a field's tensor by its extension.
func field(ext string, data []byte) (tensor.LoDTensor, error) {
	switch ext {
	case "cls", "cls2", "index", "inx", "id":
		v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return tensor.LoDTensor{}, format.Corrupt("%s is not a decimal integer: %q", ext, truncate(data))
		}
		return tensor.LoDTensor{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{v})}, nil
	case "npy":
		t, err := parseNPY(data)
		return tensor.LoDTensor{Tensor: t}, err
	}
	t, err := tensor.FromBytes(tensor.Uint8, tensor.Shape{len(data)}, data)
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	return tensor.NewLoDTensor(t, tensor.LoD{{0, len(data)}})
}

func truncate(b []byte) []byte { return b[:min(len(b), 32)] }

// fail positions err at sample idx, member (if known) and offset.
func (r *Reader) fail(idx int, member string, off int64, err error) error {
	if member != "" {
		err = fmt.Errorf("member %s: %w", member, err)
	}
	return &format.Error{Format: "wds", File: r.name, Chunk: -1, Record: idx, Offset: off, Err: err}
}

// counter reads r through a buffer, counting the bytes read, and passes
// seeks through (within the buffer when they land there), so that tar
// skips the data it does not read. It keeps r's last error, so that a
// failed read is told from damage.
type counter struct {
	r    io.Reader
	n    int64 // the logical position: bytes read, or where a seek put it
	buf  []byte
	b, e int   // buf[b:e] is unread
	err  error // r's last error other than io.EOF
	// headers are the bytes handed on from position from on while
	// recording (tar.Reader.Next: a member's headers, from its first, a
	// pax or long-name header's, to its own), at most maxHeaderBytes.
	headers   []byte
	from      int64
	recording bool
}

// maxHeaderBytes bounds the headers recorded before a member: tar allows
// a pax header or a long name 1 MiB each.
const maxHeaderBytes = 4 << 20

// recordFrom starts recording the bytes handed on from position at on.
func (c *counter) recordFrom(at int64) {
	c.headers, c.from, c.recording = c.headers[:0], at, true
}

func (c *counter) stopRecording() { c.recording = false }

// record keeps the part of p, just handed on, that lies at or past from.
func (c *counter) record(p []byte) {
	if !c.recording {
		return
	}
	if skip := c.from - (c.n - int64(len(p))); skip > 0 {
		p = p[min(skip, int64(len(p))):]
	}
	if room := maxHeaderBytes - len(c.headers); room > 0 {
		c.headers = append(c.headers, p[:min(len(p), room)]...)
	}
}

// failed reports whether err is a failed read of r, not damage.
func (c *counter) failed(err error) bool { return c.err != nil && errors.Is(err, c.err) }

func (c *counter) keep(err error) {
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
}

func (c *counter) Read(p []byte) (int, error) {
	if c.b == c.e {
		if len(p) >= 32<<10 { // large reads go straight through
			n, err := c.r.Read(p)
			c.n += int64(n)
			c.keep(err)
			c.record(p[:n])
			return n, err
		}
		if c.buf == nil {
			c.buf = make([]byte, 32<<10)
		}
		n, err := c.r.Read(c.buf)
		c.b, c.e = 0, n
		c.keep(err)
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.b:c.e])
	c.b += n
	c.n += int64(n)
	c.record(p[:n])
	return n, nil
}

// Seek is only ever asked by tar for a skip relative to where it stands
// (or for that place): it is refused, and tar reads and discards, when r
// cannot seek.
func (c *counter) Seek(off int64, whence int) (int64, error) {
	s, ok := c.r.(io.Seeker)
	if !ok || whence != io.SeekCurrent {
		return 0, errors.ErrUnsupported
	}
	if off >= 0 && off <= int64(c.e-c.b) {
		c.b += int(off)
		c.n += off
		return c.n, nil
	}
	n, err := s.Seek(c.n+off, io.SeekStart)
	if err == nil {
		c.n, c.b, c.e = n, 0, 0
	}
	c.keep(err)
	return n, err
}

// reset puts the counter at off, where r now stands.
func (c *counter) reset(off int64) { c.n, c.b, c.e = off, 0, 0 }

// NewGzipReader reads the gzip'd shard in r; name identifies it in errors.
func NewGzipReader(r io.Reader, name string) (*Reader, error) {
	zr, err := format.GzipReader(r, "wds", name)
	if err != nil {
		return nil, err
	}
	return NewReader(zr, name), nil
}

// Decode writes the tar inside the gzip'd shard src to dst (format.Gunzip).
func Decode(dst io.Writer, src io.Reader, name string, limit int64) error {
	return format.Gunzip(dst, src, "wds", name, limit)
}
