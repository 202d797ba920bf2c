package messages

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/actorfeed/actorfeed/tensor"
)

// maxBytes bounds the storage of one tensor, as package tensor does.
const maxBytes = 1 << 48

// Ref names one instance of an item: instance Row of Part, counted as
// tensor.Slots.Instances counts (a row of a dense tensor, a top-level
// sequence of a LoD tensor). A stage that regroups instances (shuffle,
// batch) moves Refs, not tensors.
type Ref struct {
	Part *Part
	Row  int
}

// Refs appends the item's instances, in id order, to dst as references
// into its parts (an item of slots counts as one part). It checks the
// instance counts against the ids and rows, not the tensors: JoinRefs and
// ToSlots do that. Nothing is copied or converted, and nothing is allocated
// per instance beyond dst.
func (b *Batch) Refs(dst []Ref) ([]Ref, error) {
	parts := b.GetParts()
	if len(b.GetSlots()) > 0 {
		if len(parts) > 0 {
			return dst, fmt.Errorf("%w: a batch with both slots and parts", ErrInvalid)
		}
		parts = []*Part{{Slots: b.GetSlots()}}
	}
	ids, rows := len(b.GetIds()), b.GetRows()
	if len(rows) == 0 {
		total := 0
		for k, p := range parts {
			n, err := p.instances()
			if err != nil {
				return dst, fmt.Errorf("part %d: %w", k, err)
			}
			// A part's instance count need not be backed by bytes (rows
			// of size 0): bound it by the ids before making refs.
			if n > ids-total {
				return dst, fmt.Errorf("%w: %d ids for more than %d instances", ErrInvalid, ids, total+n)
			}
			for r := range n {
				dst = append(dst, Ref{Part: p, Row: r})
			}
			total += n
		}
		if total != ids {
			return dst, fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, ids, total)
		}
		return dst, nil
	}
	if len(rows) != ids {
		return dst, fmt.Errorf("%w: %d rows for %d ids", ErrInvalid, len(rows), ids)
	}
	bases := make([]int, len(parts)+1)
	uniform := len(parts) > 0 // every part holds as many instances as the first, at least one
	for k, p := range parts {
		n, err := p.instances()
		if err != nil {
			return dst, fmt.Errorf("part %d: %w", k, err)
		}
		bases[k+1] = bases[k] + n
		uniform = uniform && n > 0 && n == bases[1]
	}
	total := bases[len(parts)]
	for i, r := range rows {
		if int(r) >= total {
			return dst, fmt.Errorf("%w: row %d of instance %d is past the parts' %d instances", ErrInvalid, r, i, total)
		}
		// The part holding instance r: bases[k] <= r < bases[k+1]. Parts of
		// one size (a window of full stacked groups) need no search.
		var k int
		if uniform {
			k = int(r) / bases[1]
		} else {
			k = partOf(bases, int(r))
		}
		dst = append(dst, Ref{Part: parts[k], Row: int(r) - bases[k]})
	}
	return dst, nil
}

// partOf is the part k holding instance r: bases[k] <= r < bases[k+1],
// with bases[0] == 0 <= r < bases[len(bases)-1]. Parts are mostly of one
// size (full stacked groups, a few cut short), so the part r would be in
// if all were the first's size is tried first, then its neighbours.
func partOf(bases []int, r int) int {
	last := len(bases) - 2
	if size := bases[1]; size > 0 {
		k := min(r/size, last)
		for range 2 {
			switch {
			case r < bases[k]:
				k--
			case r >= bases[k+1]:
				k++
			default:
				return k
			}
		}
	}
	k, found := slices.BinarySearch(bases, r)
	if !found {
		k--
	}
	for bases[k+1] == bases[k] { // an empty part: r is in a later one
		k++
	}
	return k
}

// instances counts the part's instances from its wire form, as
// tensor.Slots.Instances does: every slot must agree.
func (p *Part) instances() (int, error) {
	n := 0
	for i, t := range p.GetSlots() {
		var m int64
		if lod := t.GetLod(); len(lod) > 0 {
			m = int64(len(lod[0].GetOffsets())) - 1
		} else if sh := t.GetShape(); len(sh) > 0 {
			m = sh[0]
		}
		if m < 0 || m > maxDim {
			return 0, fmt.Errorf("%w: slot %d holds %d instances", ErrInvalid, i, m)
		}
		if i > 0 && int(m) != n {
			return 0, fmt.Errorf("%w: %w: slot %d holds %d instances, slot 0 holds %d", ErrInvalid, tensor.ErrShape, i, m, n)
		}
		n = int(m)
	}
	return n, nil
}

// Gather makes an item of the instances refs names, in that order, with
// ids (one per ref, kept by the item), sharing the parts' storage: nothing
// is copied. The item names each part once, and carries rows unless the
// refs are exactly the parts' instances in order.
func Gather(refs []Ref, ids []uint64) (*Batch, error) {
	if len(ids) != len(refs) {
		return nil, fmt.Errorf("%w: %d ids for %d instances", ErrInvalid, len(ids), len(refs))
	}
	// A shuffled group draws on a few parts (a window's groups), not one
	// per instance: start small, append grows them past that.
	c := min(len(refs), 16)
	parts := make([]*Part, 0, c)
	var scratch [32]int                                // on the stack unless more than 16 parts need it
	bases, counts := scratch[:0:16], scratch[16:16:32] // capped: appends past 16 reallocate
	var index map[*Part]int                            // once there are too many parts to search
	rows := make([]uint32, len(refs))
	identity, total := true, 0
	for i, r := range refs {
		k := -1
		if index != nil {
			if j, ok := index[r.Part]; ok {
				k = j
			}
		} else {
			for j := len(parts) - 1; j >= 0; j-- {
				if parts[j] == r.Part {
					k = j
					break
				}
			}
		}
		if k < 0 {
			n, err := r.Part.instances()
			if err != nil {
				return nil, err
			}
			if total+n > 1<<32-1 {
				return nil, fmt.Errorf("%w: more than 2^32 instances in the parts of one item", ErrInvalid)
			}
			k = len(parts)
			parts, bases, counts = append(parts, r.Part), append(bases, total), append(counts, n)
			total += n
			switch {
			case index != nil:
				index[r.Part] = k
			case len(parts) > 32:
				index = make(map[*Part]int, 2*len(parts))
				for j, p := range parts {
					index[p] = j
				}
			}
		}
		if r.Row < 0 || r.Row >= counts[k] {
			return nil, fmt.Errorf("%w: instance %d names row %d of a part of %d", ErrInvalid, i, r.Row, counts[k])
		}
		rows[i] = uint32(bases[k] + r.Row)
		identity = identity && rows[i] == uint32(i)
	}
	b := &Batch{Parts: parts, Ids: ids}
	if !identity || total != len(refs) {
		b.Rows = rows
	}
	return b, nil
}

// JoinRefs copies the instances refs names, in that order, into one batch:
// into the storage of recycled where a slot of it is large enough and
// aligned (recycled must not be used afterwards and must not share storage
// with the parts), fresh storage otherwise. It always copies: the batch
// shares nothing with the parts. Dense instances alike in dtype and
// trailing dimensions are copied row by row straight from their wire form;
// anything else (LoD) goes through tensor.ConcatInto.
func JoinRefs(refs []Ref, recycled tensor.Slots) (tensor.Slots, error) {
	return JoinRefsAlloc(refs, recycled, nil)
}

// JoinRefsAlloc is JoinRefs that takes a slot's storage from alloc (when
// not nil) where recycled has none large enough (tensor.Storage).
func JoinRefsAlloc(refs []Ref, recycled tensor.Slots, alloc tensor.Alloc) (tensor.Slots, error) {
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: a batch of no instances", ErrInvalid)
	}
	if out, ok := joinDense(refs, recycled, alloc); ok {
		return out, nil
	}
	converted := make(map[*Part]tensor.Slots)
	insts := make([]tensor.Slots, len(refs))
	for i, r := range refs {
		s, ok := converted[r.Part]
		if !ok {
			var err error
			if s, err = newUnpacker(r.Part.GetSlots()).slots(r.Part.GetSlots()); err != nil {
				return nil, err
			}
			n, err := s.Instances()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if r.Row < 0 || r.Row >= n {
				return nil, fmt.Errorf("%w: instance %d is row %d of a part of %d", ErrInvalid, i, r.Row, n)
			}
			converted[r.Part] = s
		}
		inst, err := s.Slice(r.Row, r.Row+1)
		if err != nil {
			return nil, fmt.Errorf("%w: instance %d: %w", ErrInvalid, i, err)
		}
		insts[i] = inst
	}
	slots, err := tensor.ConcatAlloc(recycled, insts, alloc)
	if err != nil {
		return nil, fmt.Errorf("%w: joining instances: %w", ErrInvalid, err)
	}
	return slots, nil
}

// joinDense is JoinRefs's fast path: every tensor dense (no LoD), or every
// one of a slot a level of sequences (a stacked group of encoded images, one
// such sequence), agreeing with the first instance's in slot count, dtype,
// rank and trailing dimensions, with data of exactly the size its shape
// says. ok is false otherwise; the general path then also says what is
// wrong.
func joinDense(refs []Ref, recycled tensor.Slots, alloc tensor.Alloc) (tensor.Slots, bool) {
	width := len(refs[0].Part.GetSlots())
	if width == 0 {
		return nil, false
	}
	for _, r := range refs {
		if len(r.Part.GetSlots()) != width {
			return nil, false
		}
	}
	out := make(tensor.Slots, width)
	for s := range out {
		var reuse []byte
		if s < len(recycled) {
			reuse = recycled[s].Bytes()
		}
		if len(refs[0].Part.GetSlots()[s].GetLod()) > 0 {
			t, ok := joinSequences(refs, s, reuse, alloc)
			if !ok {
				return nil, false
			}
			out[s] = t
			continue
		}
		t, ok := joinSlot(refs, s, reuse, alloc)
		if !ok {
			return nil, false
		}
		out[s] = tensor.LoDTensor{Tensor: t}
	}
	return out, true
}

// joinSequences joins slot s of refs when every part's tensor there is one
// level of sequences, agreeing in dtype and trailing dimensions: instance r
// of a part is its rows offsets[r]..offsets[r+1], and the batch is their
// rows end to end under a level of offsets, as tensor.Concat makes it. Only
// the offsets an instance uses are checked, against the part's rows.
func joinSequences(refs []Ref, s int, reuse []byte, alloc tensor.Alloc) (tensor.LoDTensor, bool) {
	ref := refs[0].Part.GetSlots()[s]
	dt, tail, row, ok := rowLayout(ref)
	if !ok {
		return tensor.LoDTensor{}, false
	}
	offsets := make([]int, len(refs)+1)
	var last *Tensor
	for i, r := range refs {
		t := r.Part.GetSlots()[s]
		if t != last {
			shape := t.GetShape()
			if t.GetDtype() != ref.GetDtype() || len(t.GetLod()) != 1 || len(shape) != len(ref.GetShape()) || !slices.Equal(shape[1:], tail) {
				return tensor.LoDTensor{}, false
			}
			if n := shape[0]; n < 0 || n > maxBytes/row || int64(len(t.GetData())) != n*row {
				return tensor.LoDTensor{}, false
			}
			if offs := t.GetLod()[0].GetOffsets(); len(offs) < 2 || offs[0] != 0 || offs[len(offs)-1] != shape[0] {
				return tensor.LoDTensor{}, false
			}
			last = t
		}
		lo, hi, ok := sequence(t, r.Row)
		if !ok || hi-lo > maxDim-int64(offsets[i]) {
			return tensor.LoDTensor{}, false
		}
		offsets[i+1] = offsets[i] + int(hi-lo)
	}
	rows := offsets[len(refs)]
	if int64(rows) > maxBytes/row {
		return tensor.LoDTensor{}, false
	}
	shape := make(tensor.Shape, len(ref.GetShape()))
	shape[0] = rows
	for k, d := range tail {
		shape[k+1] = int(d)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(reuse)))%8 != 0 {
		reuse = nil
	}
	out, err := tensor.WrapBytes(dt, shape, tensor.Storage(reuse, rows*int(row), alloc))
	if err != nil {
		return tensor.LoDTensor{}, false
	}
	data, rb := out.Bytes(), int(row)
	for i, r := range refs {
		lo, hi, _ := sequence(r.Part.GetSlots()[s], r.Row)
		copy(data[offsets[i]*rb:offsets[i+1]*rb], r.Part.GetSlots()[s].GetData()[int(lo)*rb:int(hi)*rb])
	}
	lt, err := tensor.NewLoDTensor(out, tensor.LoD{offsets})
	return lt, err == nil
}

// sequence is the rows of t's sequence r, when its offsets are in order
// and within t's rows.
func sequence(t *Tensor, r int) (lo, hi int64, ok bool) {
	offs := t.GetLod()[0].GetOffsets()
	if r < 0 || r+1 >= len(offs) {
		return 0, 0, false
	}
	lo, hi = offs[r], offs[r+1]
	return lo, hi, 0 <= lo && lo <= hi && hi <= t.GetShape()[0]
}

// rowLayout is a wire tensor's dtype, trailing dimensions and bytes a row,
// when its dtype is known, its rank at least 1 and a row holds bytes (the
// joins size by it).
func rowLayout(t *Tensor) (dt tensor.DType, tail []int64, row int64, ok bool) {
	dt = tensor.DType(t.GetDtype())
	if !dt.Valid() || int32(t.GetDtype()) != int32(dt) || len(t.GetShape()) == 0 {
		return 0, nil, 0, false
	}
	tail = t.GetShape()[1:]
	row = int64(dt.Size())
	for _, d := range tail {
		if d <= 0 || row > maxBytes/d {
			return 0, nil, 0, false
		}
		row *= d
	}
	return dt, tail, row, true
}

func joinSlot(refs []Ref, s int, reuse []byte, alloc tensor.Alloc) (tensor.Tensor, bool) {
	ref := refs[0].Part.GetSlots()[s]
	dt, tail, row, ok := rowLayout(ref)
	if !ok {
		return tensor.Tensor{}, false
	}
	if int64(len(refs)) > maxBytes/row {
		return tensor.Tensor{}, false
	}
	var last *Tensor // checked already: runs of refs into one part are common
	for _, r := range refs {
		t := r.Part.GetSlots()[s]
		if t != last {
			shape := t.GetShape()
			if t.GetDtype() != ref.GetDtype() || len(t.GetLod()) > 0 || len(shape) != len(ref.GetShape()) || !slices.Equal(shape[1:], tail) {
				return tensor.Tensor{}, false
			}
			if n := shape[0]; n < 0 || n > maxBytes/row || int64(len(t.GetData())) != n*row {
				return tensor.Tensor{}, false
			}
			last = t
		}
		if r.Row < 0 || int64(r.Row) >= t.GetShape()[0] {
			return tensor.Tensor{}, false
		}
	}
	shape := make(tensor.Shape, len(ref.GetShape()))
	shape[0] = len(refs)
	for k, d := range tail {
		shape[k+1] = int(d)
	}
	size := len(refs) * int(row)
	if uintptr(unsafe.Pointer(unsafe.SliceData(reuse)))%8 != 0 {
		reuse = nil
	}
	out, err := tensor.WrapBytes(dt, shape, tensor.Storage(reuse, size, alloc))
	if err != nil {
		return tensor.Tensor{}, false
	}
	data, rb := out.Bytes(), int(row)
	for i, r := range refs {
		src := r.Part.GetSlots()[s].GetData()
		copy(data[i*rb:(i+1)*rb], src[r.Row*rb:(r.Row+1)*rb])
	}
	return out, true
}
