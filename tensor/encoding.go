package tensor

import (
	"encoding/binary"
	"fmt"
)

// Encoding of a Slots value (one record = one instance or one batch). All
// integers are little-endian. Version 1:
//
//	offset  size     field
//	0       4        magic "AFTS"
//	4       2        version (1)
//	6       2        slot count n
//	then n slots, each:
//	        1        dtype (DType value, 1..9)
//	        1        rank r (<= MaxRank)
//	        1        LoD levels L (<= MaxLoDLevels)
//	        1        reserved, 0
//	        8*r      dimensions, uint64 each
//	        L times: 4 offset count c (>= 2), then 8*c offsets, uint64 each
//	        8        data length in bytes (= elements * dtype size)
//	        ...      data, row-major, little-endian
//
// A decoder rejects anything else, including trailing bytes.
const (
	encodingMagic   = "AFTS"
	encodingVersion = 1
	// MaxRank is the highest rank the encoding accepts.
	MaxRank = 32
	// MaxLoDLevels is the most LoD levels the encoding accepts.
	MaxLoDLevels = 16
	// MaxSlots is the most slots a record can hold.
	MaxSlots = 1<<16 - 1

	headerSize     = 8
	slotHeaderSize = 4
)

// EncodedSize is the exact number of bytes AppendEncode adds for s.
func EncodedSize(s Slots) int {
	n := headerSize
	for _, t := range s {
		n += slotHeaderSize + 8*t.Rank() + 8 + len(t.data)
		for _, level := range t.LoD {
			n += 4 + 8*len(level)
		}
	}
	return n
}

// Encode returns the encoding of s.
func Encode(s Slots) ([]byte, error) {
	return AppendEncode(make([]byte, 0, EncodedSize(s)), s)
}

// AppendEncode appends the encoding of s to dst.
func AppendEncode(dst []byte, s Slots) ([]byte, error) {
	if len(s) > MaxSlots {
		return dst, fmt.Errorf("%w: %d slots, at most %d", ErrShape, len(s), MaxSlots)
	}
	for i, t := range s {
		switch {
		case !t.dtype.Valid():
			return dst, fmt.Errorf("%w: slot %d: %v", ErrDType, i, t.dtype)
		case t.Rank() > MaxRank:
			return dst, fmt.Errorf("%w: slot %d: rank %d above %d", ErrShape, i, t.Rank(), MaxRank)
		case len(t.LoD) > MaxLoDLevels:
			return dst, fmt.Errorf("%w: slot %d: %d levels above %d", ErrLoD, i, len(t.LoD), MaxLoDLevels)
		}
	}
	dst = append(dst, encodingMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, encodingVersion)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	for _, t := range s {
		dst = append(dst, byte(t.dtype), byte(t.Rank()), byte(len(t.LoD)), 0)
		for _, d := range t.shape {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(d))
		}
		for _, level := range t.LoD {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(level)))
			for _, o := range level {
				dst = binary.LittleEndian.AppendUint64(dst, uint64(o))
			}
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(len(t.data)))
		dst = append(dst, t.data...)
	}
	return dst, nil
}

// DecodeError reports where in a record decoding failed. It wraps
// ErrMalformed, and the more specific ErrShape or ErrLoD where one applies.
type DecodeError struct {
	Offset int // byte offset within the record
	Msg    string
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("tensor: malformed encoding at byte %d: %s", e.Offset, e.Msg)
}

// Unwrap returns ErrMalformed and the more specific cause, if any.
func (e *DecodeError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrMalformed, e.Err}
	}
	return []error{ErrMalformed}
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) fail(format string, args ...any) error {
	return d.failAs(nil, format, args...)
}

// failAs is fail with a more specific cause (ErrShape, ErrLoD) to wrap.
func (d *decoder) failAs(kind error, format string, args ...any) error {
	return &DecodeError{Offset: d.off, Msg: fmt.Sprintf(format, args...), Err: kind}
}

func (d *decoder) need(n int, what string) error {
	if n < 0 || len(d.b)-d.off < n {
		return d.fail("%s needs %d bytes, %d remain", what, n, len(d.b)-d.off)
	}
	return nil
}

// needFor is need for count items of what, formatting the message only on
// failure (Decode runs once per record).
func (d *decoder) needFor(n, count int, what string) error {
	if n < 0 || len(d.b)-d.off < n {
		return d.fail("%d %s need %d bytes, %d remain", count, what, n, len(d.b)-d.off)
	}
	return nil
}

func (d *decoder) u64() uint64 {
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

type slotDesc struct {
	dtype      DType
	shape      Shape
	lod        LoD
	start, end int
}

// Decode parses one record made by Encode. The tensors' storage is a fresh
// copy in one aligned allocation, so b may be reused afterwards. Decode never
// allocates much more than len(b) and never panics on hostile input.
func Decode(b []byte) (Slots, error) {
	d := &decoder{b: b}
	if err := d.need(headerSize, "header"); err != nil {
		return nil, err
	}
	if string(b[:4]) != encodingMagic {
		return nil, d.fail("bad magic %q", b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != encodingVersion {
		d.off = 4
		return nil, d.fail("unsupported version %d", v)
	}
	n := int(binary.LittleEndian.Uint16(b[6:]))
	d.off = headerSize
	// Every slot takes at least its header and data length: bound n by the
	// input before allocating for it.
	if err := d.needFor(n*(slotHeaderSize+8), n, "slots"); err != nil {
		return nil, err
	}
	descs := make([]slotDesc, n)
	arena := 0
	for i := range descs {
		if err := d.slot(i, &descs[i]); err != nil {
			return nil, err
		}
		arena += (descs[i].end - descs[i].start + 7) &^ 7
	}
	if d.off != len(b) {
		return nil, d.fail("%d trailing bytes", len(b)-d.off)
	}
	storage := alignedBytes(arena)
	out := make(Slots, n)
	pos := 0
	for i, s := range descs {
		size := s.end - s.start
		data := storage[pos : pos+size : pos+size]
		copy(data, b[s.start:s.end])
		pos += (size + 7) &^ 7
		out[i] = LoDTensor{Tensor: Tensor{dtype: s.dtype, shape: s.shape, data: data}, LoD: s.lod}
	}
	return out, nil
}

func (d *decoder) slot(i int, s *slotDesc) error {
	if err := d.need(slotHeaderSize, "slot header"); err != nil {
		return err
	}
	h := d.b[d.off : d.off+slotHeaderSize]
	s.dtype = DType(h[0])
	rank, levels := int(h[1]), int(h[2])
	switch {
	case !s.dtype.Valid():
		return d.fail("slot %d: unknown dtype %d", i, h[0])
	case rank > MaxRank:
		return d.fail("slot %d: rank %d above %d", i, rank, MaxRank)
	case levels > MaxLoDLevels:
		return d.fail("slot %d: %d LoD levels above %d", i, levels, MaxLoDLevels)
	case levels > 0 && rank == 0:
		return d.fail("slot %d: rank-0 tensor with LoD", i)
	case h[3] != 0:
		return d.fail("slot %d: reserved byte is %d", i, h[3])
	}
	d.off += slotHeaderSize
	if err := d.need(8*rank, "dimensions"); err != nil {
		return err
	}
	s.shape = make(Shape, rank)
	elems := 1
	for k := range s.shape {
		v := d.u64()
		if v > maxBytes {
			return d.fail("slot %d: dimension %d is %d", i, k, v)
		}
		s.shape[k] = int(v)
		if elems = mulCapped(elems, int(v)); elems < 0 {
			return d.fail("slot %d: shape too large", i)
		}
	}
	if levels > 0 {
		s.lod = make(LoD, levels)
	}
	for l := range levels {
		if err := d.need(4, "LoD offset count"); err != nil {
			return err
		}
		c := int(binary.LittleEndian.Uint32(d.b[d.off:]))
		d.off += 4
		if err := d.needFor(8*c, c, "LoD offsets"); err != nil {
			return err
		}
		level := make([]int, c)
		for k := range level {
			v := d.u64()
			if v > maxBytes {
				return d.fail("slot %d: LoD offset %d", i, v)
			}
			level[k] = int(v)
		}
		s.lod[l] = level
	}
	if levels > 0 {
		if err := s.lod.Validate(s.shape[0]); err != nil {
			return d.failAs(ErrLoD, "slot %d: %v", i, err)
		}
	}
	if err := d.need(8, "data length"); err != nil {
		return err
	}
	size := d.u64()
	want := uint64(mulCapped(elems, s.dtype.Size()))
	if size != want {
		return d.failAs(ErrShape, "slot %d: %v%v needs %d data bytes, header says %d", i, s.dtype, s.shape, want, size)
	}
	if err := d.need(int(size), "tensor data"); err != nil {
		return err
	}
	s.start, s.end = d.off, d.off+int(size)
	d.off = s.end
	return nil
}

// mulCapped multiplies non-negative ints, returning -1 past maxBytes.
func mulCapped(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	if b != 0 && a > maxBytes/b {
		return -1
	}
	return a * b
}
