package messages

import (
	"slices"
	"unsafe"

	"github.com/actorfeed/actorfeed/tensor"
)

// maxBytes bounds the storage of one tensor, as package tensor does.
const maxBytes = 1 << 48

// joinDense joins parts straight from their wire form into fresh storage,
// without converting every part to tensor.Slots first: the common case of
// a batch stage joining single-instance parts. It applies when every tensor
// is dense (no LoD) and agrees with part 0's in dtype, rank and trailing
// dimensions, with data of exactly the size its shape says, and the rows
// add up to instances. ok is false otherwise; the caller then takes the
// general path, which also says what is wrong. A slot of recycled whose
// storage is large enough and aligned is overwritten instead of allocating.
func joinDense(parts []*Part, instances int, recycled tensor.Slots) (tensor.Slots, bool) {
	if len(parts) < 2 || len(parts[0].GetSlots()) == 0 {
		return nil, false
	}
	out := make(tensor.Slots, len(parts[0].GetSlots()))
	for s := range out {
		var reuse []byte
		if s < len(recycled) {
			reuse = recycled[s].Bytes()
		}
		t, ok := joinSlot(parts, s, instances, reuse)
		if !ok {
			return nil, false
		}
		out[s] = tensor.LoDTensor{Tensor: t}
	}
	return out, true
}

func joinSlot(parts []*Part, s, instances int, reuse []byte) (tensor.Tensor, bool) {
	ref := parts[0].GetSlots()[s]
	dt := tensor.DType(ref.GetDtype())
	if !dt.Valid() || int32(ref.GetDtype()) != int32(dt) || len(ref.GetShape()) == 0 {
		return tensor.Tensor{}, false
	}
	tail := ref.GetShape()[1:]
	row := int64(dt.Size())
	for _, d := range tail {
		if d <= 0 || row > maxBytes/d {
			return tensor.Tensor{}, false
		}
		row *= d
	}
	rows := int64(0)
	for _, p := range parts {
		if len(p.GetSlots()) != len(parts[0].GetSlots()) {
			return tensor.Tensor{}, false
		}
		t := p.GetSlots()[s]
		shape := t.GetShape()
		if t.GetDtype() != ref.GetDtype() || len(t.GetLod()) > 0 || len(shape) != len(ref.GetShape()) || !slices.Equal(shape[1:], tail) {
			return tensor.Tensor{}, false
		}
		if r := shape[0]; r < 0 || r > maxBytes/row || int64(len(t.GetData())) != r*row {
			return tensor.Tensor{}, false
		}
		rows += shape[0]
	}
	if rows != int64(instances) {
		return tensor.Tensor{}, false
	}
	shape := make(tensor.Shape, len(ref.GetShape()))
	shape[0] = int(rows)
	for k, d := range tail {
		shape[k+1] = int(d)
	}
	size := int(rows * row)
	var out tensor.Tensor
	var err error
	if cap(reuse) >= size && size > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(reuse)))%8 == 0 {
		out, err = tensor.WrapBytes(dt, shape, reuse[:size])
	} else {
		out, err = tensor.Zeros(dt, shape)
	}
	if err != nil {
		return tensor.Tensor{}, false
	}
	data, off := out.Bytes(), 0
	for _, p := range parts {
		off += copy(data[off:], p.GetSlots()[s].GetData())
	}
	return out, true
}
