package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Shape lists a tensor's dimensions, outermost first. In a declared shape
// (what a reader or a queue expects) a dimension of -1 is a wildcard; the
// shape of an actual tensor never holds a negative dimension.
type Shape []int

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// NumElements is the product of the dimensions (1 for rank 0). It returns -1
// if any dimension is negative or the product overflows an int.
func (s Shape) NumElements() int {
	n := 1
	for _, d := range s {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt/d {
			return -1
		}
		n *= d
	}
	return n
}

// Concrete reports whether no dimension is negative.
func (s Shape) Concrete() bool {
	for _, d := range s {
		if d < 0 {
			return false
		}
	}
	return true
}

// Matches reports whether the actual shape a conforms to the declared shape
// s: the same rank, and every non-negative declared dimension equal to the
// actual one (-1 matches anything).
func (s Shape) Matches(a Shape) bool {
	if len(s) != len(a) {
		return false
	}
	for i, d := range s {
		if d >= 0 && d != a[i] {
			return false
		}
	}
	return true
}

// Equal reports whether both shapes have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy that does not share memory with s.
func (s Shape) Clone() Shape {
	if s == nil {
		return nil
	}
	return append(Shape(make([]int, 0, len(s))), s...)
}

// String formats the shape as [d0,d1,...], the form ParseShape reads.
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// ParseShape reads a shape written as "[1,28,28]", "1,28,28" or "1x28x28";
// "-1" is accepted as a wildcard, "[]" is rank 0.
func ParseShape(text string) (Shape, error) {
	t := strings.TrimSpace(text)
	t = strings.TrimSuffix(strings.TrimPrefix(t, "["), "]")
	if strings.TrimSpace(t) == "" {
		return Shape{}, nil
	}
	fields := strings.FieldsFunc(t, func(r rune) bool { return r == ',' || r == 'x' || r == ' ' })
	s := make(Shape, 0, len(fields))
	for _, f := range fields {
		d, err := strconv.Atoi(f)
		if err != nil || d < -1 {
			return nil, fmt.Errorf("%w: %q: dimension %q is not an integer >= -1", ErrShape, text, f)
		}
		s = append(s, d)
	}
	return s, nil
}
