package tensor

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. The numeric values are part of the
// encoding (docs/formats.md) and never change.
type DType uint8

// The supported element types.
const (
	Invalid DType = iota
	Bool
	Uint8
	Int8
	Int16
	Int32
	Int64
	Float16
	Float32
	Float64
	numDTypes
)

var dtypeInfo = [numDTypes]struct {
	name string
	size int
}{
	Invalid: {"invalid", 0},
	Bool:    {"bool", 1},
	Uint8:   {"uint8", 1},
	Int8:    {"int8", 1},
	Int16:   {"int16", 2},
	Int32:   {"int32", 4},
	Int64:   {"int64", 8},
	Float16: {"float16", 2},
	Float32: {"float32", 4},
	Float64: {"float64", 8},
}

// Valid reports whether d is one of the supported element types.
func (d DType) Valid() bool { return d > Invalid && d < numDTypes }

// Size is the size of one element in bytes, 0 for an invalid DType.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the lower-case name used in specs and error messages.
func (d DType) String() string {
	if d < numDTypes {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType parses a name as printed by String; "float" and "double" are
// accepted as aliases of float32 and float64.
func ParseDType(s string) (DType, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	switch name {
	case "float":
		return Float32, nil
	case "double":
		return Float64, nil
	}
	for d := Bool; d < numDTypes; d++ {
		if dtypeInfo[d].name == name {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("%w: unknown dtype %q", ErrDType, s)
}

// MarshalText implements encoding.TextMarshaler so DTypes read well in YAML and JSON.
func (d DType) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("%w: %v", ErrDType, d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
