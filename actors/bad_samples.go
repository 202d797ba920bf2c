package actors

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// dropSamples is out, a map's result for an item whose slots are in,
// without the rows bad names, and ids without theirs. A dense slot the map
// made afresh is compacted where it lies, so that its storage (a stepped
// batch's, or the device's) stays the batch's and nothing is copied but
// the rows after a dropped one; a slot that shares in's storage (the item
// is kept for a replay) or holds sequences is copied.
func dropSamples(in, out tensor.Slots, ids []uint64, bad *format.BadSamples) (tensor.Slots, []uint64, error) {
	n := len(ids)
	if got, err := out.Instances(); err != nil {
		return nil, nil, err
	} else if got != n {
		return nil, nil, fmt.Errorf("a map's result of %d samples with its bad samples has %d instances", n, got)
	}
	if err := checkBadRows(bad, n); err != nil || len(bad.Rows) == 0 {
		return out, ids, err
	}
	res := make(tensor.Slots, len(out))
	for k, s := range out {
		var err error
		if len(s.LoD) == 0 && !sharesStorage(s, in) {
			res[k], err = compactRows(s, n, bad.Rows)
		} else {
			res[k], err = gatherRows(s, n, bad.Rows)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("slot %d: %w", k, err)
		}
	}
	kept := make([]uint64, 0, n-len(bad.Rows))
	for r, id := range ids {
		if _, found := slices.BinarySearch(bad.Rows, r); !found {
			kept = append(kept, id)
		}
	}
	return res, kept, nil
}

// checkBadRows checks what a map says of its bad samples: rows ascending,
// within the item, each with its error.
func checkBadRows(bad *format.BadSamples, n int) error {
	if len(bad.Rows) != len(bad.Errs) || len(bad.Rows) > n {
		return fmt.Errorf("a map's bad samples: %d rows, %d errors, of %d samples", len(bad.Rows), len(bad.Errs), n)
	}
	for i, r := range bad.Rows {
		if r < 0 || r >= n || (i > 0 && r <= bad.Rows[i-1]) {
			return fmt.Errorf("a map's bad samples: rows %v of %d samples: want them ascending, each once", bad.Rows, n)
		}
	}
	return nil
}

// sharesStorage reports whether t's bytes overlap any of in's.
func sharesStorage(t tensor.LoDTensor, in tensor.Slots) bool {
	a := t.Bytes()
	for _, s := range in {
		b := s.Bytes()
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a)) {
			return true
		}
	}
	return false
}

// compactRows moves the rows of dense t (n of them) that are not dropped
// to its front and returns them as a tensor over the same storage.
func compactRows(t tensor.LoDTensor, n int, drop []int) (tensor.LoDTensor, error) {
	data := t.Bytes()
	row := len(data) / n
	at, next := 0, 0
	for r := range n {
		if next < len(drop) && drop[next] == r {
			next++
			continue
		}
		if at != r {
			copy(data[at*row:(at+1)*row], data[r*row:(r+1)*row])
		}
		at++
	}
	shape := slices.Clone(t.Shape())
	shape[0] = at
	kept, err := tensor.WrapBytes(t.DType(), shape, data[:at*row])
	return tensor.LoDTensor{Tensor: kept}, err
}

// gatherRows copies the rows of t (n instances) that are not dropped into
// a tensor of its own; a single run of them is a view.
func gatherRows(t tensor.LoDTensor, n int, drop []int) (tensor.LoDTensor, error) {
	one := tensor.Slots{t}
	var runs []tensor.Slots
	lo := 0
	for _, r := range append(slices.Clone(drop), n) {
		if r > lo {
			run, err := one.Slice(lo, r)
			if err != nil {
				return tensor.LoDTensor{}, err
			}
			runs = append(runs, run)
		}
		lo = r + 1
	}
	switch len(runs) {
	case 0:
		empty, err := one.Slice(0, 0)
		if err != nil {
			return tensor.LoDTensor{}, err
		}
		return empty[0], nil
	case 1:
		return runs[0][0], nil
	}
	joined, err := tensor.Concat(runs)
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	return joined[0], nil
}

// placeWithout is the padding and cuts of item b without its rows drop: a
// dropped row among the last Padding ones was padding, and a cut loses the
// rows dropped within it. The positions stay: a dropped sample is a hole
// in the order, as a skipped record is.
func placeWithout(b *messages.Batch, drop []int) (uint32, []uint32) {
	pad := int(b.Padding)
	from := len(b.Ids) - pad
	for _, r := range drop {
		if r >= from {
			pad--
		}
	}
	if len(b.Cuts) == 0 {
		return uint32(pad), nil
	}
	cuts := slices.Clone(b.Cuts)
	i, end := 0, int(b.Cuts[0])
	for _, r := range drop {
		for r >= end && i+1 < len(cuts) {
			i++
			end += int(b.Cuts[i])
		}
		cuts[i]--
	}
	return uint32(pad), cuts
}

// noteBadSamples lists the samples a map could not read, ids being the
// item's, with the damaged chunks skipped (Stats.Corrupt), each once
// whichever restarts or passes met it.
func (s *shared) noteBadSamples(bad *format.BadSamples, ids []uint64) {
	for i, r := range bad.Rows {
		f, _ := messages.SplitID(ids[r])
		err := bad.Errs[i]
		if err == nil {
			err = errors.New("a map could not read it")
		}
		s.corrupt.note(CorruptChunk{File: s.fileName(f), Offset: -1, Records: 1, Err: err})
	}
}
