package messages

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/actorfeed/actorfeed/tensor"
)

// ErrInvalid is wrapped by every error about a message that breaks the
// protocol's shape rules: a tensor whose data does not fit its dtype and
// shape, a bad LoD, or ids that do not match the instances.
var ErrInvalid = errors.New("messages: invalid message")

// Sample ids pack the source file's index (top 24 bits) and the record's
// index within the file (low 40 bits).
const (
	recordBits = 40
	recordMask = 1<<recordBits - 1
	// MaxFiles is the number of files a pipeline can name.
	MaxFiles = 1 << (64 - recordBits)
	// MaxRecords is the number of records a file can hold.
	MaxRecords = 1 << recordBits
)

// SampleID packs a file index and a record index into one id.
func SampleID(file, record int) uint64 {
	return uint64(file)<<recordBits | uint64(record)&recordMask
}

// SplitID unpacks a sample id.
func SplitID(id uint64) (file, record int) {
	return int(id >> recordBits), int(id & recordMask)
}

// FromSlots builds a batch item from slots without copying tensor data: the
// message's Data fields alias the tensors' storage, so in-process hand-off
// moves no bytes. ids must hold one id per instance.
func FromSlots(slots tensor.Slots, ids []uint64) (*Batch, error) {
	n, err := slots.Instances()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, len(ids), n)
	}
	return &Batch{Slots: newBlock(len(slots), rankSum(slots)).tensors(slots), Ids: ids}, nil
}

// FromParts builds an item whose instances stay in the storage they came
// in: each of parts is a run of instances (one decoded record, typically)
// and ids holds one id per instance across them, in order. Nothing is
// copied; the stage that batches the item joins the parts (see ToSlots).
func FromParts(parts []tensor.Slots, ids []uint64) (*Batch, error) {
	n, slots, dims := 0, 0, 0
	for k, p := range parts {
		m, err := p.Instances()
		if err != nil {
			return nil, fmt.Errorf("%w: part %d: %w", ErrInvalid, k, err)
		}
		n, slots, dims = n+m, slots+len(p), dims+rankSum(p)
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, len(ids), n)
	}
	return &Batch{Parts: newBlock(slots, dims).parts(parts), Ids: ids}, nil
}

func rankSum(s tensor.Slots) int {
	n := 0
	for _, t := range s {
		n += t.Rank()
	}
	return n
}

// block holds the wire structs of many tensors in a few allocations: a
// stage that regroups instances builds one message per instance.
type block struct {
	ptrs []*Tensor
	ts   []Tensor
	dims []int64
}

func newBlock(tensors, dims int) *block {
	return &block{ptrs: make([]*Tensor, tensors), ts: make([]Tensor, tensors), dims: make([]int64, dims)}
}

// tensors converts slots, taking the next len(slots) tensors of the block.
func (b *block) tensors(slots tensor.Slots) []*Tensor {
	out := b.ptrs[:len(slots):len(slots)]
	b.ptrs = b.ptrs[len(slots):]
	for i, s := range slots {
		t := &b.ts[i]
		t.Dtype, t.Data = DType(s.DType()), s.Bytes()
		t.Shape, b.dims = b.dims[:s.Rank():s.Rank()], b.dims[s.Rank():]
		for k, d := range s.Shape() {
			t.Shape[k] = int64(d)
		}
		if len(s.LoD) > 0 {
			t.Lod = make([]*Level, len(s.LoD))
			for k, level := range s.LoD {
				l := &Level{Offsets: make([]int64, len(level))}
				for j, o := range level {
					l.Offsets[j] = int64(o)
				}
				t.Lod[k] = l
			}
		}
		out[i] = t
	}
	b.ts = b.ts[len(slots):]
	return out
}

func (b *block) parts(parts []tensor.Slots) []*Part {
	ps := make([]Part, len(parts))
	out := make([]*Part, len(parts))
	for k, p := range parts {
		ps[k].Slots = b.tensors(p)
		out[k] = &ps[k]
	}
	return out
}

// Instances is the number of instances the batch carries (its ids).
func (b *Batch) Instances() int { return len(b.GetIds()) }

// ToSlots returns the batch's tensors, checked against the shape rules. Data
// that is suitably aligned (always so in-process) is used in place; data
// that is not, as can come off the wire, is copied once into aligned
// storage. A batch of one part (or of slots) without rows is used in place;
// any other is joined into fresh storage (JoinRefs: the one copy of a
// pipeline's batching).
func (b *Batch) ToSlots() (tensor.Slots, error) { return b.ToSlotsInto(nil) }

// ToSlotsInto is ToSlots that joins into the storage of recycled where it is
// large enough (see JoinRefs): recycled must not be used afterwards and must
// not share storage with the batch.
func (b *Batch) ToSlotsInto(recycled tensor.Slots) (tensor.Slots, error) {
	if parts := b.GetParts(); len(b.GetRows()) == 0 && len(parts) <= 1 {
		// Slots, or one part, used in place.
		src := b.GetSlots()
		if len(parts) == 1 {
			if len(src) > 0 {
				return nil, fmt.Errorf("%w: a batch with both slots and parts", ErrInvalid)
			}
			src = parts[0].GetSlots()
		}
		slots, err := newUnpacker(src).slots(src)
		if err != nil {
			return nil, err
		}
		return slots, b.checkIDs(slots)
	}
	refs, err := b.Refs(make([]Ref, 0, len(b.GetIds())))
	if err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		return tensor.Slots{}, nil
	}
	return JoinRefs(refs, recycled)
}

func (b *Batch) checkIDs(slots tensor.Slots) error {
	n, err := slots.Instances()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(b.GetIds()) != n {
		return fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, len(b.GetIds()), n)
	}
	return nil
}

// unpacker converts wire tensors into a few allocations shared by all of
// them: one for the slots, one for the shapes.
type unpacker struct {
	buf  tensor.Slots
	dims []int
}

// newUnpacker sizes an unpacker for the given lists of tensors.
func newUnpacker(lists ...[]*Tensor) *unpacker {
	n, dims := 0, 0
	for _, ts := range lists {
		for _, t := range ts {
			n, dims = n+1, dims+len(t.GetShape())
		}
	}
	return &unpacker{buf: make(tensor.Slots, n), dims: make([]int, dims)}
}

func (u *unpacker) slots(ts []*Tensor) (tensor.Slots, error) {
	out := u.buf[:len(ts):len(ts)]
	u.buf = u.buf[len(ts):]
	for i, t := range ts {
		rank := len(t.GetShape())
		lt, err := t.toLoDTensor(u.dims[:rank:rank])
		if err != nil {
			return nil, fmt.Errorf("%w: slot %d: %w", ErrInvalid, i, err)
		}
		u.dims = u.dims[rank:]
		out[i] = lt
	}
	return out, nil
}

// maxDim bounds one wire dimension, as tensor bounds storage.
const maxDim = 1 << 48

// shapeFor converts a wire shape, refusing negative dimensions and any whose
// element count is not exactly elems (checked without overflow), so a
// hostile shape cannot cause a large allocation. The shape is written to
// dst, which has the length of dims.
func shapeFor(dims []int64, elems int, dst []int) (tensor.Shape, error) {
	shape := tensor.Shape(dst)
	zero := false
	for k, d := range dims {
		if d < 0 || d > maxDim {
			return nil, fmt.Errorf("%w: dimension %d is %d", tensor.ErrShape, k, d)
		}
		shape[k] = int(d)
		zero = zero || d == 0
	}
	n := 1
	if zero {
		n = 0
	} else {
		for _, d := range shape {
			if n > elems/d {
				return nil, fmt.Errorf("%w: shape %v needs more than the %d elements sent", tensor.ErrShape, shape, elems)
			}
			n *= d
		}
	}
	if n != elems {
		return nil, fmt.Errorf("%w: shape %v has %d elements, %d sent", tensor.ErrShape, shape, n, elems)
	}
	return shape, nil
}

// toLoDTensor converts the tensor, writing its shape to dims.
func (t *Tensor) toLoDTensor(dims []int) (tensor.LoDTensor, error) {
	dt := tensor.DType(t.GetDtype())
	if !dt.Valid() || int32(t.GetDtype()) != int32(dt) {
		return tensor.LoDTensor{}, fmt.Errorf("%w: dtype %d", tensor.ErrDType, t.GetDtype())
	}
	data := t.GetData()
	shape, err := shapeFor(t.GetShape(), len(data)/dt.Size(), dims)
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	if size := dt.Size(); len(data) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(size) != 0 {
		if len(data)%size != 0 {
			return tensor.LoDTensor{}, fmt.Errorf("%w: %d bytes of %v", tensor.ErrShape, len(data), dt)
		}
		z, err := tensor.Zeros(dt, tensor.Shape{len(data) / size})
		if err != nil {
			return tensor.LoDTensor{}, err
		}
		copy(z.Bytes(), data)
		data = z.Bytes()
	}
	if data == nil {
		data = []byte{}
	}
	tt, err := tensor.WrapBytes(dt, shape, data)
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	var lod tensor.LoD
	if len(t.GetLod()) > 0 {
		lod = make(tensor.LoD, len(t.GetLod()))
		for k, l := range t.GetLod() {
			lod[k] = make([]int, len(l.GetOffsets()))
			for j, o := range l.GetOffsets() {
				lod[k][j] = int(o)
			}
		}
	}
	return tensor.NewLoDTensor(tt, lod)
}
