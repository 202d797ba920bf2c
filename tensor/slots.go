package tensor

import (
	"fmt"
	"unsafe"
)

// Slots is one instance or one batch: one LoDTensor per output slot, in the
// order the reader declares them (for Fashion-MNIST: image, label).
type Slots []LoDTensor

// Instances is the number of instances every slot holds (see
// LoDTensor.Instances). Slots that disagree are an error.
func (s Slots) Instances() (int, error) {
	if len(s) == 0 {
		return 0, nil
	}
	n := s[0].Instances()
	for i := 1; i < len(s); i++ {
		if m := s[i].Instances(); m != n {
			return 0, fmt.Errorf("%w: slot %d holds %d instances, slot 0 holds %d", ErrShape, i, m, n)
		}
	}
	return n, nil
}

// Slice returns instances [lo, hi) of every slot, sharing storage.
func (s Slots) Slice(lo, hi int) (Slots, error) {
	out := make(Slots, len(s))
	for i, t := range s {
		c, err := t.Slice(lo, hi)
		if err != nil {
			return nil, fmt.Errorf("slot %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

// Clone returns a deep copy.
func (s Slots) Clone() Slots {
	if s == nil {
		return nil
	}
	out := make(Slots, len(s))
	for i, t := range s {
		out[i] = t.Clone()
	}
	return out
}

// Equal reports whether both hold equal tensors in the same order.
func (s Slots) Equal(o Slots) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if !s[i].Equal(o[i]) {
			return false
		}
	}
	return true
}

// Bytes is the total size of the slots' storage.
func (s Slots) Bytes() int {
	n := 0
	for _, t := range s {
		n += len(t.data)
	}
	return n
}

// Concat joins instances into a batch, slot by slot: dimension 0 is summed;
// the element type, rank, trailing dimensions and number of LoD levels must
// agree across instances (the error names the slot and both shapes); LoD
// levels are joined by shifting offsets, so {0,3,5} + {0,2,6} becomes
// {0,3,5,7,11}. The batch owns fresh storage; the instances are not aliased.
func Concat(instances []Slots) (Slots, error) {
	return ConcatInto(nil, instances)
}

// ConcatInto is Concat that reuses the storage of recycled, a batch the
// caller no longer needs (typically an earlier batch of the same pipeline):
// a slot whose old storage is large enough is overwritten in place instead of
// allocating. recycled must not be used afterwards and must not share
// storage with the instances (as it would if they were Split from it); nil
// allocates as Concat.
//
// An instance that does not match the first is an *InstanceError saying
// which, so that a caller can name where it came from.
func ConcatInto(recycled Slots, instances []Slots) (Slots, error) {
	return ConcatAlloc(recycled, instances, nil)
}

// Alloc provides storage of size bytes for a tensor's data, 8-byte
// aligned, that nothing else uses; nil to have the default allocation (a
// failing allocator says why to its caller by other means).
type Alloc func(size int) []byte

// ConcatAlloc is ConcatInto that takes a slot's storage from alloc (when
// not nil) where recycled has none large enough: memory a device copies
// from, say. Storage alloc returns that is too small or unaligned is not
// used.
func ConcatAlloc(recycled Slots, instances []Slots, alloc Alloc) (Slots, error) {
	if len(instances) == 0 {
		return nil, fmt.Errorf("%w: concat of no instances", ErrShape)
	}
	first := instances[0]
	for k := range instances {
		if len(instances[k]) != len(first) {
			return nil, &InstanceError{Instance: k, Err: fmt.Errorf("%w: instance %d has %d slots, instance 0 has %d", ErrShape, k, len(instances[k]), len(first))}
		}
	}
	out := make(Slots, len(first))
	for slot := range first {
		var reuse []byte
		if slot < len(recycled) {
			reuse = recycled[slot].data
		}
		t, err := concatSlot(instances, slot, reuse, alloc)
		if err != nil {
			return nil, err
		}
		out[slot] = t
	}
	return out, nil
}

func concatSlot(instances []Slots, slot int, reuse []byte, alloc Alloc) (LoDTensor, error) {
	ref := &instances[0][slot]
	if ref.Rank() == 0 {
		return LoDTensor{}, fmt.Errorf("%w: slot %d: a rank-0 tensor cannot be batched", ErrShape, slot)
	}
	tail := ref.shape[1:]
	rows, size := 0, 0
	for k := range instances {
		t := &instances[k][slot]
		if t.dtype != ref.dtype {
			return LoDTensor{}, &InstanceError{Instance: k, Err: fmt.Errorf("%w: slot %d: instance %d is %v, instance 0 is %v", ErrDType, slot, k, t.dtype, ref.dtype)}
		}
		if len(t.shape) != len(ref.shape) || !Shape(t.shape[1:]).Equal(tail) {
			return LoDTensor{}, &InstanceError{Instance: k, Err: fmt.Errorf("%w: slot %d: shape %v of instance %d does not match shape %v of instance 0", ErrShape, slot, t.shape, k, ref.shape)}
		}
		if len(t.LoD) != len(ref.LoD) {
			return LoDTensor{}, &InstanceError{Instance: k, Err: fmt.Errorf("%w: slot %d: instance %d has %d LoD levels, instance 0 has %d", ErrLoD, slot, k, len(t.LoD), len(ref.LoD))}
		}
		rows += t.shape[0]
		size += len(t.data)
	}
	data := Storage(reuse, size, alloc)
	off := 0
	for k := range instances {
		off += copy(data[off:], instances[k][slot].data)
	}
	shape := ref.shape.Clone()
	shape[0] = rows
	return LoDTensor{Tensor: Tensor{dtype: ref.dtype, shape: shape, data: data}, LoD: concatLoD(instances, slot)}, nil
}

// Storage is size bytes for a tensor's data: reuse when it holds that
// many, else what alloc gives when it is large enough and 8-byte aligned,
// else fresh aligned storage.
func Storage(reuse []byte, size int, alloc Alloc) []byte {
	if cap(reuse) >= size && size > 0 {
		return reuse[:size]
	}
	if alloc != nil && size > 0 {
		if b := alloc(size); len(b) >= size && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 {
			return b[:size]
		}
	}
	return alignedBytes(size)
}

func concatLoD(instances []Slots, slot int) LoD {
	levels := len(instances[0][slot].LoD)
	if levels == 0 {
		return nil
	}
	out := make(LoD, levels)
	for l := range levels {
		n := 1
		for _, inst := range instances {
			n += len(inst[slot].LoD[l]) - 1
		}
		joined := make([]int, 1, n)
		for _, inst := range instances {
			shift := joined[len(joined)-1]
			for _, o := range inst[slot].LoD[l][1:] {
				joined = append(joined, o+shift)
			}
		}
		out[l] = joined
	}
	return out
}

// Split cuts a batch back into its instances (see Slots.Instances), each
// sharing the batch's storage. Split(Concat(xs)) equals xs when every
// instance without LoD has one row.
func Split(batch Slots) ([]Slots, error) {
	n, err := batch.Instances()
	if err != nil {
		return nil, err
	}
	out := make([]Slots, n)
	for i := range n {
		if out[i], err = batch.Slice(i, i+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// InstanceError is a failure to batch caused by one instance (its slots,
// dtype, shape or LoD levels differ from the first instance's). It wraps
// ErrShape, ErrDType or ErrLoD.
type InstanceError struct {
	Instance int // index of the instance in the batch
	Err      error
}

func (e *InstanceError) Error() string { return e.Err.Error() }
func (e *InstanceError) Unwrap() error { return e.Err }
