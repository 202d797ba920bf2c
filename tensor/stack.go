package tensor

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Stack stacks single-instance records along dimension 0 as it decodes
// them, straight from their encoding into one block of storage: a file
// reader's group of records becomes one tensor per slot, with no allocation
// per record. A record stacks when it agrees in slot count, dtypes and
// trailing dimensions with the first record stacked (the template, kept
// across Take) and every slot is either dense with exactly one row, or one
// sequence (a LoD of one level, {0, rows}) of any length: an encoded image,
// a token list. Sequences are stacked as Concat joins them, their rows end
// to end under a level of offsets. Other records are left to Decode.
type Stack struct {
	capacity int // records a block may hold, as asked
	maxBytes int // bytes a block may hold; 0 bounds nothing
	limit    int // records this template's block holds: capacity, fewer under maxBytes
	n        int
	tmpl     []stackSlot
	arena    []byte                // capacity rows of every dense slot; nil until the first Append after Take
	alloc    func(size int) []byte // recycled storage for a group, or nil
	ragged   bool                  // a slot of the template is a sequence
	seqBytes int                   // the sequences' bytes stacked since Take
	denseRow int                   // a record's bytes in the dense slots
}

type stackSlot struct {
	dtype    DType
	shape    Shape // of one record: shape[0] == 1 (a sequence's: its first's)
	rowBytes int   // a record's bytes; a sequence's: one row's
	off      int   // of the slot's region in the arena
	seq      *sequences
	largest  int // a sequence slot's largest record, in bytes, since the template
}

// sequences are a sequence slot's records since Take: their rows end to
// end, and where each starts (a LoD level).
type sequences struct {
	data    []byte
	offsets []int // len n+1, offsets[0] == 0
}

// NewStack returns a stack that holds up to capacity records.
func NewStack(capacity int) *Stack {
	c := max(capacity, 1)
	return &Stack{capacity: c, limit: c}
}

// SetMaxBytes bounds a block's storage to n bytes (the rows of every
// slot), from the next template on: a block of records of r bytes holds
// min(capacity, n/r) of them, at least one. Without it, a block of large
// records is capacity times their size, allocated (and zeroed) in full even
// when a file's group ends after a few of them.
func (s *Stack) SetMaxBytes(n int) { s.maxBytes = max(n, 0) }

// Len is the number of records stacked since the last Take.
func (s *Stack) Len() int { return s.n }

// Full reports whether the stack holds as many records as its block can:
// capacity, or fewer under SetMaxBytes, which also bounds the sequences'
// bytes (the last record stacked may pass it).
func (s *Stack) Full() bool {
	if s.n == s.limit {
		return true
	}
	return s.maxBytes > 0 && s.seqBytes > 0 && s.n*s.denseRow+s.seqBytes >= s.maxBytes
}

// AppendEncoded decodes rec, a record made by Encode, onto the stack and
// returns nil. When rec does not stack (see Stack), or the stack is full, it
// returns rec decoded by Decode instead, leaving the stack unchanged. A
// malformed record is the error Decode returns.
func (s *Stack) AppendEncoded(rec []byte) (Slots, error) {
	if s.n == s.limit || s.tmpl == nil || s.ragged || !s.matches(rec) {
		slots, err := Decode(rec)
		if err != nil || s.Append(slots) {
			return nil, err
		}
		return slots, nil
	}
	s.ensureArena()
	// matches checked the layout: copy each slot's data to its row.
	off := headerSize
	for i := range s.tmpl {
		t := &s.tmpl[i]
		off += slotHeaderSize + 8*len(t.shape) + 8
		dst := t.off + s.n*t.rowBytes
		copy(s.arena[dst:dst+t.rowBytes], rec[off:off+t.rowBytes])
		off += t.rowBytes
	}
	s.n++
	return nil, nil
}

// Append stacks slots, a decoded record, copying its data, and reports
// whether it did: it does not when the record does not stack (see Stack)
// or the stack is full, leaving the stack unchanged. A reader of a format
// that is not Encode's stacks its records so.
func (s *Stack) Append(slots Slots) bool {
	if s.n == s.limit || s.tmpl == nil || !s.fits(slots) {
		if s.n > 0 || !s.setTemplate(slots) {
			return false
		}
	}
	s.ensureArena()
	for i := range s.tmpl {
		t := &s.tmpl[i]
		if t.seq != nil {
			t.seq.add(slots[i].data, slots[i].shape[0])
			s.seqBytes += len(slots[i].data)
			t.largest = max(t.largest, len(slots[i].data))
			continue
		}
		dst := t.off + s.n*t.rowBytes
		copy(s.arena[dst:dst+t.rowBytes], slots[i].data)
	}
	s.n++
	return true
}

// add appends a sequence of rows.
func (q *sequences) add(data []byte, rows int) {
	if len(q.data)+len(data) > cap(q.data) {
		grown := alignedBytes(max(2*cap(q.data), len(q.data)+len(data)))
		q.data = grown[:copy(grown, q.data)]
	}
	q.data = append(q.data, data...)
	q.offsets = append(q.offsets, q.offsets[len(q.offsets)-1]+rows)
}

// drop forgets the last sequence.
func (q *sequences) drop(rowBytes int) int {
	n := len(q.offsets) - 1
	q.offsets = q.offsets[:n]
	size := len(q.data) - q.offsets[n-1]*rowBytes
	q.data = q.data[:q.offsets[n-1]*rowBytes]
	return size
}

// fits reports whether slots are laid out exactly as the template.
func (s *Stack) fits(slots Slots) bool {
	if len(slots) != len(s.tmpl) {
		return false
	}
	for i := range slots {
		t, tm := &slots[i], &s.tmpl[i]
		if t.dtype != tm.dtype || len(t.shape) != len(tm.shape) {
			return false
		}
		if tm.seq != nil {
			if !oneSequence(t) || !t.shape[1:].Equal(tm.shape[1:]) {
				return false
			}
		} else if len(t.LoD) > 0 || len(t.data) != tm.rowBytes || !t.shape.Equal(tm.shape) {
			return false
		}
	}
	return true
}

// oneSequence reports whether t is one sequence of its rows: a LoD of one
// level, {0, rows}.
func oneSequence(t *LoDTensor) bool {
	return len(t.LoD) == 1 && len(t.LoD[0]) == 2 && t.LoD[0][0] == 0 && t.Rank() > 0 && t.LoD[0][1] == t.shape[0]
}

// ensureArena gives the stack its block, recycled or new, before the first
// row after a Take.
func (s *Stack) ensureArena() {
	if s.arena != nil {
		return
	}
	for i := range s.tmpl {
		if t := &s.tmpl[i]; t.seq != nil {
			// A group ends at the record that takes its bytes to the
			// bound, so the bound and the largest record so far hold
			// it unless a larger one comes: grown by doubling, the
			// block was three times the group's bytes, a third of them
			// copied. A record past the bound is left to that growth:
			// one huge record must not make every later block huge.
			bound := s.boundOr(1 << 20)
			size := min(s.limit*t.largest, bound+min(t.largest, bound))
			t.seq = &sequences{data: alignedBytes(size)[:0], offsets: make([]int, 1, s.limit+1)}
		}
	}
	size := s.arenaSize()
	if s.alloc != nil && size > 0 {
		if b := s.alloc(size); len(b) == size && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 {
			s.arena = b
		}
	}
	if s.arena == nil {
		s.arena = alignedBytes(size)
	}
}

// boundOr is maxBytes, or or when nothing is bound.
func (s *Stack) boundOr(or int) int {
	if s.maxBytes > 0 {
		return s.maxBytes
	}
	return or
}

// arenaSize is the bytes of a block of capacity records' dense slots.
func (s *Stack) arenaSize() int {
	size := 0
	for _, t := range s.tmpl {
		if t.seq == nil {
			size += (s.limit*t.rowBytes + 7) &^ 7
		}
	}
	return size
}

// matches reports whether rec is laid out exactly as the template: same
// header, slot count, dtypes, ranks and dimensions, no LoD, and data of the
// size that says, with nothing after it. Such a record is a valid encoding.
func (s *Stack) matches(rec []byte) bool {
	if len(rec) < headerSize || string(rec[:4]) != encodingMagic ||
		binary.LittleEndian.Uint16(rec[4:]) != encodingVersion ||
		int(binary.LittleEndian.Uint16(rec[6:])) != len(s.tmpl) {
		return false
	}
	off := headerSize
	for i := range s.tmpl {
		t := &s.tmpl[i]
		rank := len(t.shape)
		if len(rec)-off < slotHeaderSize+8*rank+8 {
			return false
		}
		h := rec[off : off+slotHeaderSize]
		if DType(h[0]) != t.dtype || int(h[1]) != rank || h[2] != 0 || h[3] != 0 {
			return false
		}
		off += slotHeaderSize
		for _, d := range t.shape {
			if binary.LittleEndian.Uint64(rec[off:]) != uint64(d) {
				return false
			}
			off += 8
		}
		if binary.LittleEndian.Uint64(rec[off:]) != uint64(t.rowBytes) {
			return false
		}
		off += 8
		if len(rec)-off < t.rowBytes {
			return false
		}
		off += t.rowBytes
	}
	return off == len(rec)
}

// setTemplate makes slots, a decoded record, the template if it stacks (the
// stack is empty).
func (s *Stack) setTemplate(slots Slots) bool {
	row, ragged := 0, false
	for i := range slots {
		t := &slots[i]
		seq := oneSequence(t)
		if !seq && (len(t.LoD) > 0 || t.Rank() == 0 || t.shape[0] != 1) {
			return false
		}
		ragged = ragged || seq
		if !seq {
			row += len(t.data)
		}
	}
	if len(slots) == 0 {
		return false
	}
	limit := s.capacity
	if s.maxBytes > 0 && row > 0 {
		limit = max(1, min(limit, s.maxBytes/row))
	}
	tmpl := make([]stackSlot, len(slots))
	off := 0
	for i := range slots {
		t := &slots[i]
		tmpl[i] = stackSlot{dtype: t.dtype, shape: t.shape.Clone(), rowBytes: len(t.data), off: off}
		if oneSequence(t) {
			tmpl[i].rowBytes = t.dtype.Size() * t.shape[1:].NumElements()
			tmpl[i].seq = &sequences{}
			tmpl[i].largest = len(t.data)
			continue
		}
		off += (limit*len(t.data) + 7) &^ 7
	}
	s.tmpl, s.arena, s.limit, s.ragged, s.seqBytes, s.denseRow = tmpl, nil, limit, ragged, 0, row
	return true
}

// Row returns stacked record i as one instance, sharing the stack's
// storage.
func (s *Stack) Row(i int) (Slots, error) {
	if i < 0 || i >= s.n {
		return nil, fmt.Errorf("%w: row %d of %d stacked", ErrShape, i, s.n)
	}
	out := make(Slots, len(s.tmpl))
	for k, t := range s.tmpl {
		if q := t.seq; q != nil {
			lo, hi := q.offsets[i], q.offsets[i+1]
			shape := t.shape.Clone()
			shape[0] = hi - lo
			data := q.data[lo*t.rowBytes : hi*t.rowBytes : hi*t.rowBytes]
			out[k] = LoDTensor{Tensor: Tensor{dtype: t.dtype, shape: shape, data: data}, LoD: LoD{{0, hi - lo}}}
			continue
		}
		start := t.off + i*t.rowBytes
		out[k] = LoDTensor{Tensor: Tensor{dtype: t.dtype, shape: t.shape, data: s.arena[start : start+t.rowBytes : start+t.rowBytes]}}
	}
	return out, nil
}

// SetAlloc makes the stack take the block for each group from alloc
// instead of allocating one: alloc gets the block's size in bytes and
// returns storage that nobody reads any more (typically a block TakeBlock
// returned whose group was consumed), or nil to have the stack allocate.
// Storage of another size, or not 8-byte aligned, is not used. The stack
// overwrites every row it hands out, so the storage need not be zeroed.
func (s *Stack) SetAlloc(alloc func(size int) []byte) { s.alloc = alloc }

// Drop forgets the last record stacked.
func (s *Stack) Drop() {
	if s.n == 0 {
		return
	}
	for _, t := range s.tmpl {
		if t.seq != nil {
			s.seqBytes -= t.seq.drop(t.rowBytes)
		}
	}
	s.n--
}

// Take returns the records stacked, one tensor per slot with one row per
// record, and empties the stack. The storage returned is the caller's: the
// stack never writes it again (unless alloc hands it back, see SetAlloc). Take on an
// empty stack returns nil.
func (s *Stack) Take() Slots {
	out, _ := s.TakeBlock()
	return out
}

// TakeBlock is Take, and also returns the block of storage the group's
// tensors are views of (see SetAlloc).
func (s *Stack) TakeBlock() (Slots, []byte) {
	if s.n == 0 {
		return nil, nil
	}
	out := make(Slots, len(s.tmpl))
	dims := 0
	for _, t := range s.tmpl {
		dims += len(t.shape)
	}
	shapes := make([]int, dims)
	for k := range s.tmpl {
		t := &s.tmpl[k]
		shape := Shape(shapes[:len(t.shape):len(t.shape)])
		shapes = shapes[len(t.shape):]
		copy(shape, t.shape)
		shape[0] = s.n
		if q := t.seq; q != nil {
			shape[0] = q.offsets[s.n]
			out[k] = LoDTensor{Tensor: Tensor{dtype: t.dtype, shape: shape, data: q.data[:len(q.data):len(q.data)]}, LoD: LoD{q.offsets}}
			t.seq = &sequences{} // the next group's, made by ensureArena
			continue
		}
		size := s.n * t.rowBytes
		out[k] = LoDTensor{Tensor: Tensor{dtype: t.dtype, shape: shape, data: s.arena[t.off : t.off+size : t.off+size]}}
	}
	block := s.arena
	s.n, s.arena, s.seqBytes = 0, nil, 0
	return out, block
}
