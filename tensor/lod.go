package tensor

import (
	"fmt"
	"strconv"
	"strings"
)

// LoD (level of detail) describes how the rows of a tensor group into
// sequences, possibly nested, as offsets: level 0 is the outermost. For
// example LoD{{0, 2, 3}, {0, 2, 5, 8}} says the tensor's 8 rows form three
// sequences [0,2) [2,5) [5,8), grouped into two outer sequences holding two
// and one of them. An empty LoD means "no sequence information".
type LoD [][]int

// Validate checks the rules of PaddlePaddle Fluid for a tensor with height rows:
// every level starts at 0, has at least two offsets and never descends; the
// last offset of a level equals the number of sequences of the next level
// (its offset count minus one); the last offset of the lowest level equals
// height. An empty LoD is valid.
func (l LoD) Validate(height int) error {
	for i, level := range l {
		if len(level) < 2 {
			return fmt.Errorf("%w: level %d has %d offsets, needs at least 2", ErrLoD, i, len(level))
		}
		if level[0] != 0 {
			return fmt.Errorf("%w: level %d starts at %d, not 0", ErrLoD, i, level[0])
		}
		for j := 1; j < len(level); j++ {
			if level[j] < level[j-1] {
				return fmt.Errorf("%w: level %d descends at index %d (%d after %d)", ErrLoD, i, j, level[j], level[j-1])
			}
		}
		last := level[len(level)-1]
		if i+1 < len(l) {
			if want := len(l[i+1]) - 1; last != want {
				return fmt.Errorf("%w: level %d ends at %d but level %d holds %d sequences", ErrLoD, i, last, i+1, want)
			}
		} else if last != height {
			return fmt.Errorf("%w: lowest level ends at %d but the tensor has %d rows", ErrLoD, last, height)
		}
	}
	return nil
}

// Sequences is the number of top-level sequences (level 0), or -1 for an
// empty LoD.
func (l LoD) Sequences() int {
	if len(l) == 0 {
		return -1
	}
	return len(l[0]) - 1
}

// Lengths converts offsets to lengths, the form the Python API shows:
// offsets {{0,2,5}} are lengths {{2,3}}.
func (l LoD) Lengths() [][]int {
	out := make([][]int, len(l))
	for i, level := range l {
		if len(level) == 0 {
			continue
		}
		out[i] = make([]int, len(level)-1)
		for j := 1; j < len(level); j++ {
			out[i][j-1] = level[j] - level[j-1]
		}
	}
	return out
}

// LoDFromLengths converts lengths to offsets; a negative length is an error.
func LoDFromLengths(lengths [][]int) (LoD, error) {
	out := make(LoD, len(lengths))
	for i, level := range lengths {
		offsets := make([]int, len(level)+1)
		for j, n := range level {
			if n < 0 {
				return nil, fmt.Errorf("%w: level %d length %d is negative", ErrLoD, i, n)
			}
			offsets[j+1] = offsets[j] + n
		}
		out[i] = offsets
	}
	return out, nil
}

// Clone returns a deep copy.
func (l LoD) Clone() LoD {
	if l == nil {
		return nil
	}
	out := make(LoD, len(l))
	for i, level := range l {
		out[i] = append([]int(nil), level...)
	}
	return out
}

// Equal reports whether both LoDs hold the same offsets.
func (l LoD) Equal(o LoD) bool {
	if len(l) != len(o) {
		return false
	}
	for i := range l {
		if len(l[i]) != len(o[i]) {
			return false
		}
		for j := range l[i] {
			if l[i][j] != o[i][j] {
				return false
			}
		}
	}
	return true
}

func (l LoD) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, level := range l {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('[')
		for j, o := range level {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(o))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

// LoDTensor is a tensor with optional sequence information.
type LoDTensor struct {
	Tensor
	LoD LoD
}

// NewLoDTensor pairs t with lod after validating lod against t's rows.
func NewLoDTensor(t Tensor, lod LoD) (LoDTensor, error) {
	if len(lod) > 0 && t.Rank() == 0 {
		return LoDTensor{}, fmt.Errorf("%w: a rank-0 tensor cannot carry LoD", ErrLoD)
	}
	if err := lod.Validate(t.Rows()); err != nil {
		return LoDTensor{}, err
	}
	return LoDTensor{Tensor: t, LoD: lod}, nil
}

// Instances is the number of instances the tensor holds: its top-level
// sequences if it has LoD, otherwise its rows.
func (t LoDTensor) Instances() int {
	if len(t.LoD) > 0 {
		return t.LoD.Sequences()
	}
	return t.Rows()
}

// Slice returns instances [lo, hi), sharing storage. With LoD the offsets
// of every level are cut and rebased to start at 0.
func (t LoDTensor) Slice(lo, hi int) (LoDTensor, error) {
	if len(t.LoD) == 0 {
		s, err := t.SliceRows(lo, hi)
		return LoDTensor{Tensor: s}, err
	}
	if lo < 0 || hi < lo || hi > t.LoD.Sequences() {
		return LoDTensor{}, fmt.Errorf("%w: instances [%d,%d) out of range for %d sequences", ErrShape, lo, hi, t.LoD.Sequences())
	}
	lod := make(LoD, len(t.LoD))
	a, b := lo, hi
	for i, level := range t.LoD {
		cut := make([]int, b-a+1)
		for j := range cut {
			cut[j] = level[a+j] - level[a]
		}
		lod[i] = cut
		a, b = level[a], level[b]
	}
	rows, err := t.SliceRows(a, b)
	if err != nil {
		return LoDTensor{}, err
	}
	return LoDTensor{Tensor: rows, LoD: lod}, nil
}

// Clone returns a deep copy.
func (t LoDTensor) Clone() LoDTensor {
	return LoDTensor{Tensor: t.Tensor.Clone(), LoD: t.LoD.Clone()}
}

// Equal reports whether both have the same type, shape, bytes and LoD.
func (t LoDTensor) Equal(o LoDTensor) bool {
	return t.Tensor.Equal(o.Tensor) && t.LoD.Equal(o.LoD)
}

func (t LoDTensor) String() string {
	if len(t.LoD) == 0 {
		return t.Tensor.String()
	}
	return t.Tensor.String() + " lod=" + t.LoD.String()
}
