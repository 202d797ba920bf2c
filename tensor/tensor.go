package tensor

import (
	"fmt"
	"unsafe"

	"github.com/x448/float16"
)

// Half is an IEEE 754 half-precision value stored as its bits: the Go
// element type of Float16 tensors. Half.Float32 and HalfFrom convert.
type Half = float16.Float16

// HalfFrom rounds f to the nearest half-precision value (ties to even).
func HalfFrom(f float32) Half { return float16.Fromfloat32(f) }

// Element is the set of Go types that typed views and FromSlice accept, one
// per DType.
type Element interface {
	bool | uint8 | int8 | int16 | int32 | int64 | Half | float32 | float64
}

// DTypeOf returns the DType whose elements are of Go type T.
func DTypeOf[T Element]() DType {
	var zero T
	switch any(zero).(type) {
	case bool:
		return Bool
	case uint8:
		return Uint8
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case Half:
		return Float16
	case float32:
		return Float32
	case float64:
		return Float64
	}
	panic("unreachable: Element constraint admits a type DTypeOf does not know")
}

// Tensor is a dense n-dimensional array: an element type, a concrete shape
// and contiguous little-endian storage in row-major order. The zero value is
// an empty tensor of invalid type. A Tensor is a small value that aliases its
// storage: copies share bytes, and so do slices and typed views.
type Tensor struct {
	dtype DType
	shape Shape
	data  []byte
}

// Zeros allocates a zero-filled tensor.
func Zeros(dt DType, shape Shape) (Tensor, error) {
	n, err := checkShape(dt, shape)
	if err != nil {
		return Tensor{}, err
	}
	return Tensor{dtype: dt, shape: shape.Clone(), data: alignedBytes(n * dt.Size())}, nil
}

// FromBytes wraps data, without copying, as a tensor of the given type and
// shape. len(data) must be exactly the shape's element count times the
// element size.
func FromBytes(dt DType, shape Shape, data []byte) (Tensor, error) {
	return WrapBytes(dt, shape.Clone(), data)
}

// WrapBytes is FromBytes that keeps shape instead of copying it: the caller
// hands the slice over and must not change it afterwards. It saves an
// allocation per tensor where tensors are made by the thousand (from wire
// messages, say).
func WrapBytes(dt DType, shape Shape, data []byte) (Tensor, error) {
	n, err := checkShape(dt, shape)
	if err != nil {
		return Tensor{}, err
	}
	if want := n * dt.Size(); len(data) != want {
		return Tensor{}, fmt.Errorf("%w: %v %v needs %d bytes, got %d", ErrShape, dt, shape, want, len(data))
	}
	return Tensor{dtype: dt, shape: shape, data: data}, nil
}

// FromSlice wraps values, without copying, as a tensor of shape. The tensor
// aliases the slice's memory.
func FromSlice[T Element](shape Shape, values []T) (Tensor, error) {
	dt := DTypeOf[T]()
	return FromBytes(dt, shape, asBytes(values))
}

// MustFromSlice is FromSlice that panics on a shape mismatch; for tests and
// literals.
func MustFromSlice[T Element](shape Shape, values []T) Tensor {
	t, err := FromSlice(shape, values)
	if err != nil {
		panic(err)
	}
	return t
}

func checkShape(dt DType, shape Shape) (int, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("%w: %v", ErrDType, dt)
	}
	n := shape.NumElements()
	if n < 0 || (n > 0 && n > maxBytes/dt.Size()) {
		return 0, fmt.Errorf("%w: %v is not a concrete shape of addressable size", ErrShape, shape)
	}
	return n, nil
}

// maxBytes bounds a tensor's storage so that sizes never overflow.
const maxBytes = 1 << 48

// DType is the element type.
func (t Tensor) DType() DType { return t.dtype }

// Shape is the tensor's shape. The caller must not modify it.
func (t Tensor) Shape() Shape { return t.shape }

// Rank is the number of dimensions.
func (t Tensor) Rank() int { return len(t.shape) }

// Rows is the size of dimension 0, or 0 for a rank-0 tensor.
func (t Tensor) Rows() int {
	if len(t.shape) == 0 {
		return 0
	}
	return t.shape[0]
}

// NumElements is the number of elements.
func (t Tensor) NumElements() int { return t.shape.NumElements() }

// Bytes is the little-endian storage, aliased, not copied.
func (t Tensor) Bytes() []byte { return t.data }

// rowBytes is the size of one row (one index of dimension 0).
func (t Tensor) rowBytes() int {
	if len(t.shape) == 0 {
		return 0
	}
	return Shape(t.shape[1:]).NumElements() * t.dtype.Size()
}

// SliceRows returns rows [lo, hi) of dimension 0, sharing storage.
func (t Tensor) SliceRows(lo, hi int) (Tensor, error) {
	if len(t.shape) == 0 {
		return Tensor{}, fmt.Errorf("%w: cannot slice rows of a rank-0 tensor", ErrShape)
	}
	if lo < 0 || hi < lo || hi > t.shape[0] {
		return Tensor{}, fmt.Errorf("%w: rows [%d,%d) out of range for %v", ErrShape, lo, hi, t.shape)
	}
	rb := t.rowBytes()
	shape := t.shape.Clone()
	shape[0] = hi - lo
	return Tensor{dtype: t.dtype, shape: shape, data: t.data[lo*rb : hi*rb : hi*rb]}, nil
}

// Clone returns a deep copy.
func (t Tensor) Clone() Tensor {
	c := Tensor{dtype: t.dtype, shape: t.shape.Clone()}
	if t.data != nil {
		c.data = alignedBytes(len(t.data))
		copy(c.data, t.data)
	}
	return c
}

// Equal reports whether both tensors have the same type, shape and bytes.
func (t Tensor) Equal(o Tensor) bool {
	return t.dtype == o.dtype && t.shape.Equal(o.shape) && string(t.data) == string(o.data)
}

// String describes the tensor briefly, without its values.
func (t Tensor) String() string { return fmt.Sprintf("%v%v", t.dtype, t.shape) }

// View returns the tensor's elements as a []T that aliases its storage, so
// writes through the view change the tensor. T must match the DType, the
// host must be little-endian and the storage aligned for T (storage made by
// this package always is).
func View[T Element](t Tensor) ([]T, error) {
	want := DTypeOf[T]()
	if t.dtype != want {
		return nil, fmt.Errorf("%w: view as %v of a %v tensor", ErrDType, want, t.dtype)
	}
	if !littleEndianHost {
		return nil, fmt.Errorf("%w: typed views need a little-endian host", ErrDType)
	}
	n := len(t.data) / want.Size()
	if n == 0 {
		return []T{}, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(t.data))
	if uintptr(p)%unsafe.Alignof(*new(T)) != 0 {
		return nil, fmt.Errorf("%w: storage is not aligned for %v", ErrDType, want)
	}
	return unsafe.Slice((*T)(p), n), nil
}

func asBytes[T Element](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(zero)))
}

// alignedBytes allocates n zeroed bytes aligned to 8, so every typed view of
// them is aligned.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)[:n]
}

var littleEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
