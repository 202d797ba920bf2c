package tokens

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Element is the type of a corpus's tokens on disk: one of the types
// Megatron-LM's indexed datasets declare (Code), or llm.c's.
type Element struct {
	Name  string
	Code  uint8 // Megatron-LM's code for it in a .idx header; 0 for none
	Size  int   // bytes a token
	Float bool  // floating point: the corpus holds values, not token ids
}

// Elements are the types Megatron-LM writes, by their .idx codes
// (megatron/core/datasets/indexed_dataset.py, DType).
var Elements = []Element{
	{"uint8", 1, 1, false}, {"int8", 2, 1, false}, {"int16", 3, 2, false}, {"int32", 4, 4, false},
	{"int64", 5, 8, false}, {"float64", 6, 8, true}, {"float32", 7, 4, true}, {"uint16", 8, 2, false},
}

// elementOf is the element of a .idx dtype code.
func elementOf(code uint8) (Element, bool) {
	for _, e := range Elements {
		if e.Code == code {
			return e, true
		}
	}
	return Element{}, false
}

// uint32Element is llm.c's token type for vocabularies past 2^16, which
// Megatron-LM's codes do not name.
var uint32Element = Element{Name: "uint32", Size: 4}

// decode converts the little-endian tokens in src, len(dst) of them, to
// int64. A float's value must be a whole number that fits an int64.
func (e Element) decode(dst []int64, src []byte) error {
	le := binary.LittleEndian
	switch e.Name {
	case "uint8":
		for i := range dst {
			dst[i] = int64(src[i])
		}
	case "int8":
		for i := range dst {
			dst[i] = int64(int8(src[i]))
		}
	case "int16":
		for i := range dst {
			dst[i] = int64(int16(le.Uint16(src[2*i:])))
		}
	case "uint16":
		for i := range dst {
			dst[i] = int64(le.Uint16(src[2*i:]))
		}
	case "int32":
		for i := range dst {
			dst[i] = int64(int32(le.Uint32(src[4*i:])))
		}
	case "uint32":
		for i := range dst {
			dst[i] = int64(le.Uint32(src[4*i:]))
		}
	case "int64":
		for i := range dst {
			dst[i] = int64(le.Uint64(src[8*i:]))
		}
	default:
		return e.decodeFloats(dst, src)
	}
	return nil
}

// decodeFloats is decode of float32 or float64 tokens.
func (e Element) decodeFloats(dst []int64, src []byte) error {
	for i := range dst {
		var v float64
		if e.Size == 8 {
			v = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
		} else {
			v = float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])))
		}
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return fmt.Errorf("token %d is %v, not a whole number", i, v)
		}
		dst[i] = int64(v)
	}
	return nil
}
