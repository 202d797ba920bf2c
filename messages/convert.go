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
	b := &Batch{Slots: make([]*Tensor, len(slots)), Ids: ids}
	for i, s := range slots {
		t := &Tensor{Dtype: DType(s.DType()), Shape: make([]int64, s.Rank()), Data: s.Bytes()}
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
		b.Slots[i] = t
	}
	return b, nil
}

// Instances is the number of instances the batch carries (its ids).
func (b *Batch) Instances() int { return len(b.GetIds()) }

// ToSlots returns the batch's tensors, checked against the shape rules. Data
// that is suitably aligned (always so in-process) is used in place; data
// that is not, as can come off the wire, is copied once into aligned
// storage.
func (b *Batch) ToSlots() (tensor.Slots, error) {
	slots := make(tensor.Slots, len(b.GetSlots()))
	for i, t := range b.GetSlots() {
		lt, err := t.toLoDTensor()
		if err != nil {
			return nil, fmt.Errorf("%w: slot %d: %w", ErrInvalid, i, err)
		}
		slots[i] = lt
	}
	n, err := slots.Instances()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(b.GetIds()) != n {
		return nil, fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, len(b.GetIds()), n)
	}
	return slots, nil
}

// maxDim bounds one wire dimension, as tensor bounds storage.
const maxDim = 1 << 48

// shapeFor converts a wire shape, refusing negative dimensions and any whose
// element count is not exactly elems (checked without overflow), so a
// hostile shape cannot cause a large allocation.
func shapeFor(dims []int64, elems int) (tensor.Shape, error) {
	shape := make(tensor.Shape, len(dims))
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

func (t *Tensor) toLoDTensor() (tensor.LoDTensor, error) {
	dt := tensor.DType(t.GetDtype())
	if !dt.Valid() || int32(t.GetDtype()) != int32(dt) {
		return tensor.LoDTensor{}, fmt.Errorf("%w: dtype %d", tensor.ErrDType, t.GetDtype())
	}
	data := t.GetData()
	shape, err := shapeFor(t.GetShape(), len(data)/dt.Size())
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
	tt, err := tensor.FromBytes(dt, shape, data)
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
