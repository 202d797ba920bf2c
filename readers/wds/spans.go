package wds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// Spans locate a shard's samples: where each starts (its first member's
// header) and where each field's data lies. They are read once from the
// headers (Reader.Spans), and a SpanReader then reads a sample by its byte
// ranges without parsing a tar header again: for small members, parsing
// headers is most of what reading a shard costs. They hold 8 bytes a
// sample and 8 a field.
type Spans struct {
	fields []string // the shard's first sample's field names, sorted
	starts []int64  // sample i's first header
	// rel and size are sample i's field f's data at [i*len(fields)+f]: its
	// offset after starts[i], and its bytes. A sample whose fields are not
	// the first's has rel[i*len(fields)] == irregular: a SpanReader reads it
	// through the tar reader, which says what is wrong with it.
	rel, size []uint32
}

// irregular marks a sample the spans do not locate.
const irregular = math.MaxUint32

// Len is the number of samples.
func (s *Spans) Len() int { return len(s.starts) }

// Starts are where the samples start: their first member's header.
func (s *Spans) Starts() []int64 { return s.starts }

// Fields are the field names of the shard's first sample, sorted.
func (s *Spans) Fields() []string { return s.fields }

// Spans reads the rest of the shard's headers, not their data, and locates
// each sample from the next one on. On an error it returns the samples
// located before it too: after damage to the framing
// (format.ErrFraming), those are the samples that can be read.
func (r *Reader) Spans() (*Spans, error) {
	sp := &Spans{}
	for {
		members, err := r.sample(false)
		if errors.Is(err, io.EOF) {
			return sp, nil
		}
		if err != nil {
			return sp, err
		}
		r.next++
		sp.add(members)
	}
}

// add locates a sample by its members.
func (s *Spans) add(members []*member) {
	start := members[0].off
	if len(s.starts) == 0 {
		s.fields = fieldNames(members)
	}
	s.starts = append(s.starts, start)
	k := len(s.fields)
	s.rel = slices.Grow(s.rel, k)[:len(s.rel)+k]
	s.size = slices.Grow(s.size, k)[:len(s.size)+k]
	rel, size := s.rel[len(s.rel)-k:], s.size[len(s.size)-k:]
	clear(size)
	for i := range rel {
		rel[i] = irregular
	}
	if len(members) != k || k == 0 {
		return
	}
	for _, m := range members {
		f, ok := slices.BinarySearch(s.fields, m.ext)
		if !ok || m.sparse || size[f] != 0 || rel[f] != irregular || m.start-start >= irregular {
			rel[0] = irregular
			return
		}
		rel[f], size[f] = uint32(m.start-start), uint32(m.size)
	}
}

// fieldNames are the members' extensions, sorted; nil when two are alike
// (every sample is then read by the tar reader, which says so).
func fieldNames(members []*member) []string {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.ext
	}
	slices.Sort(names)
	if !sortedDistinct(names) {
		return nil
	}
	return names
}

// sortedDistinct reports whether names are in order, none twice.
func sortedDistinct(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return false
		}
	}
	return true
}

// SpanReader reads a shard's samples by their Spans, through a window of
// the shard that moves forward as samples are read in order.
type SpanReader struct {
	name string
	src  io.ReaderAt
	end  int64 // the shard's size
	sp   *Spans
	next int
	win  []byte // the shard's bytes from at on
	at   int64
	tar  *Reader // for irregular samples; made when first needed
	// views, ints, shapes and lods are NextOnto's scratch: a sample's
	// fields as views of the window, its integers' bytes, its sequences'
	// shapes and LoD.
	views  tensor.Slots
	ints   [][8]byte
	shapes []tensor.Shape
	lods   []tensor.LoD
}

// window is the bytes a SpanReader reads ahead at a time.
const window = 256 << 10

// NewSpanReader reads the shard of size bytes in src by sp, from sample 0;
// name identifies it in errors.
func NewSpanReader(src io.ReaderAt, size int64, name string, sp *Spans) *SpanReader {
	return &SpanReader{name: name, src: src, end: size, sp: sp}
}

// Index is the index of the next sample.
func (r *SpanReader) Index() int { return r.next }

// Seek moves the reader to sample n (Len: the end).
func (r *SpanReader) Seek(n int) error {
	if n < 0 || n > r.sp.Len() {
		return fmt.Errorf("wds: %s: seek to sample %d of %d", r.name, n, r.sp.Len())
	}
	r.next = n
	return nil
}

// Skip passes over the next sample.
func (r *SpanReader) Skip() error {
	if r.next >= r.sp.Len() {
		return io.EOF
	}
	r.next++
	return nil
}

// Next returns the next sample's fields, as Reader.Next does, or io.EOF
// after the last. Whatever goes wrong, the reader stands at the next
// sample: the spans do not depend on the damaged one.
func (r *SpanReader) Next() (tensor.Slots, error) {
	i := r.next
	if i >= r.sp.Len() {
		return nil, io.EOF
	}
	r.next++
	k := len(r.sp.fields)
	if k == 0 || r.sp.rel[i*k] == irregular {
		return r.viaTar(i)
	}
	if err := r.hold(i, k); errors.Is(err, errCutOff) {
		return r.viaTar(i)
	} else if err != nil {
		return nil, fmt.Errorf("wds: %s: sample %d: %w", r.name, i, err)
	}
	slots := make(tensor.Slots, k)
	for f, ext := range r.sp.fields {
		off := r.sp.starts[i] + int64(r.sp.rel[i*k+f])
		data, err := r.read(off, int(r.sp.size[i*k+f]))
		if errors.Is(err, errCutOff) {
			return r.viaTar(i) // the shard is shorter since: tar names the member cut off
		}
		if err != nil {
			return nil, fmt.Errorf("wds: %s: sample %d: %w", r.name, i, err)
		}
		if slots[f], err = field(ext, slices.Clone(data)); err != nil {
			return r.viaTar(i) // which names the member
		}
	}
	return slots, nil
}

// NextOnto reads the next sample onto st when it stacks and returns nil;
// otherwise it returns it as Next does. A sample that stacks is read
// straight from the window onto the stack, with nothing allocated for it.
func (r *SpanReader) NextOnto(st *tensor.Stack) (tensor.Slots, error) {
	i, k := r.next, len(r.sp.fields)
	if i >= r.sp.Len() || k == 0 || r.sp.rel[i*k] == irregular {
		return r.Next()
	}
	if r.views == nil {
		r.views, r.ints, r.shapes, r.lods = make(tensor.Slots, k), make([][8]byte, k), make([]tensor.Shape, k), make([]tensor.LoD, k)
		for f := range k {
			r.shapes[f], r.lods[f] = tensor.Shape{0}, tensor.LoD{{0, 0}}
		}
	}
	if r.hold(i, k) != nil {
		return r.Next() // which says what is wrong
	}
	for f, ext := range r.sp.fields {
		data, err := r.read(r.sp.starts[i]+int64(r.sp.rel[i*k+f]), int(r.sp.size[i*k+f]))
		if err != nil || !r.view(f, ext, data) {
			return r.Next()
		}
	}
	if !st.Append(r.views) {
		return r.Next()
	}
	r.next++
	return nil, nil
}

// view makes field f of the views from data, as field makes it, sharing
// data and the reader's scratch; false for a field it leaves to field (an
// .npy, data that does not parse).
func (r *SpanReader) view(f int, ext string, data []byte) bool {
	var t tensor.Tensor
	var err error
	switch ext {
	case "cls", "cls2", "index", "inx", "id":
		v, perr := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
		if perr != nil {
			return false
		}
		binary.NativeEndian.PutUint64(r.ints[f][:], uint64(v))
		t, err = tensor.WrapBytes(tensor.Int64, one, r.ints[f][:])
		r.views[f] = tensor.LoDTensor{Tensor: t}
	case "npy":
		return false
	default:
		r.shapes[f][0], r.lods[f][0][1] = len(data), len(data)
		t, err = tensor.WrapBytes(tensor.Uint8, r.shapes[f], data)
		r.views[f] = tensor.LoDTensor{Tensor: t, LoD: r.lods[f]}
	}
	return err == nil
}

// one is a scalar field's shape, shared by every view of one.
var one = tensor.Shape{1}

// hold moves the window, if it must, to hold every field of sample i (k
// fields) at once, so that reading them moves it no more: the views of
// the fields read first stay the sample's bytes, and a shard whose members
// lie in another order than the fields is not fetched once a field.
func (r *SpanReader) hold(i, k int) error {
	start := r.sp.starts[i]
	lo, hi := int64(math.MaxInt64), int64(0)
	for f := range k {
		at := start + int64(r.sp.rel[i*k+f])
		lo, hi = min(lo, at), max(hi, at+int64(r.sp.size[i*k+f]))
	}
	_, err := r.read(lo, int(hi-lo))
	return err
}

// errCutOff is a span past the shard's end.
var errCutOff = errors.New("past the end")

// read is the n bytes at off, a view of the window, valid until the next
// read. An error other than errCutOff is the source's.
func (r *SpanReader) read(off int64, n int) ([]byte, error) {
	if off < r.at || off+int64(n) > r.at+int64(len(r.win)) {
		if off+int64(n) > r.end {
			return nil, errCutOff
		}
		size := int(min(max(int64(n), window), r.end-off))
		if cap(r.win) < size {
			r.win = make([]byte, size)
		}
		got, err := r.src.ReadAt(r.win[:size], off)
		if got < n {
			r.win, r.at = r.win[:0], 0
			if err == nil || errors.Is(err, io.EOF) {
				return nil, errCutOff
			}
			return nil, err
		}
		r.win, r.at = r.win[:got], off
	}
	return r.win[off-r.at : off-r.at+int64(n)], nil
}

// viaTar reads sample i through the tar reader: an irregular sample, or
// one whose data is bad, which it names by member.
func (r *SpanReader) viaTar(i int) (tensor.Slots, error) {
	if r.tar == nil {
		r.tar = NewReader(io.NewSectionReader(r.src, 0, r.end), r.name)
	}
	if err := r.tar.Seek(i, r.sp.starts[i]); err != nil {
		return nil, err
	}
	r.tar.fields = r.sp.fields
	_, slots, err := r.tar.Next()
	return slots, err
}

// KeyAt is the key of the sample whose first member's header is at off in
// the shard of size bytes in src (Spans.Starts); name identifies the shard
// in errors.
func KeyAt(src io.ReaderAt, size, off int64, name string) (string, error) {
	r := NewReader(io.NewSectionReader(src, 0, size), name)
	if err := r.Seek(0, off); err != nil {
		return "", err
	}
	m, err := r.member(false)
	if err != nil {
		return "", err
	}
	return m.key, nil
}

// A Spans' encoding, for a cache that outlives the process: a magic, the
// field count and the sample count, each field as a length and its name,
// the starts, the rels and the sizes, all little-endian, then a CRC-32C of
// all that. It is checked in full before it is trusted. Version 2 marks
// spans that take sparse members for what they are: spans of version 1
// kept by an older actorfeed located the samples after a sparse member
// wrongly, so they are read again rather than trusted.
const spansMagic = "AFSPANS2"

// MarshalBinary encodes the spans.
func (s *Spans) MarshalBinary() ([]byte, error) {
	b := append([]byte(spansMagic), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(s.fields)))
	binary.LittleEndian.PutUint64(b[12:], uint64(len(s.starts)))
	for _, f := range s.fields {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	for _, v := range s.starts {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range s.rel {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	for _, v := range s.size {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// UnmarshalSpans decodes spans MarshalBinary encoded for a shard of size
// bytes, checking that every span lies in it: what it allocates is bounded
// by len(b).
func UnmarshalSpans(b []byte, size int64) (*Spans, error) {
	bad := func(what string, args ...any) (*Spans, error) {
		return nil, format.Corrupt("wds: spans: "+what, args...)
	}
	if len(b) < 24 || string(b[:8]) != spansMagic {
		return bad("no %s magic", spansMagic)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return bad("checksum mismatch")
	}
	k, n := uint64(binary.LittleEndian.Uint32(body[8:])), binary.LittleEndian.Uint64(body[12:])
	rest := body[20:]
	if k > uint64(len(rest))/2 || n > uint64(len(rest))/8 {
		return bad("%d fields and %d samples in %d bytes", k, n, len(b))
	}
	sp := &Spans{fields: make([]string, k)}
	for i := range sp.fields {
		if len(rest) < 2 || len(rest)-2 < int(binary.LittleEndian.Uint16(rest)) {
			return bad("field %d cut off", i)
		}
		l := int(binary.LittleEndian.Uint16(rest))
		sp.fields[i], rest = string(rest[2:2+l]), rest[2+l:]
	}
	if !sortedDistinct(sp.fields) {
		return bad("fields %v not sorted and distinct", sp.fields)
	}
	if uint64(len(rest)) != n*8+2*n*k*4 {
		return bad("%d bytes for %d samples of %d fields", len(rest), n, k)
	}
	sp.starts, sp.rel, sp.size = make([]int64, n), make([]uint32, n*k), make([]uint32, n*k)
	for i := range sp.starts {
		sp.starts[i] = int64(binary.LittleEndian.Uint64(rest[8*i:]))
		if sp.starts[i] < 0 || sp.starts[i] >= size || i > 0 && sp.starts[i] <= sp.starts[i-1] {
			return bad("sample %d starts at %d", i, sp.starts[i])
		}
	}
	rest = rest[8*n:]
	for i := range sp.rel {
		sp.rel[i] = binary.LittleEndian.Uint32(rest[4*i:])
		sp.size[i] = binary.LittleEndian.Uint32(rest[4*(int(n*k)+i):])
		if j := i / int(k); sp.rel[i-i%int(k)] != irregular && sp.starts[j]+int64(sp.rel[i])+int64(sp.size[i]) > size {
			return bad("sample %d's field %d lies past the shard's end", j, i%int(k))
		}
	}
	return sp, nil
}
