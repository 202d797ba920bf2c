package wds

import (
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// NumPy's .npy format: "\x93NUMPY", a major and a minor version byte, the
// header's length (2 bytes little-endian in version 1, 4 in 2 and 3), and
// the header, a Python dict literal with the keys descr (the dtype),
// fortran_order and shape; then the array's bytes, C order unless
// fortran_order.

var npyDTypes = map[string]tensor.DType{
	"|b1": tensor.Bool, "|u1": tensor.Uint8, "<u1": tensor.Uint8, "|i1": tensor.Int8, "<i1": tensor.Int8,
	"<i2": tensor.Int16, "<i4": tensor.Int32, "<i8": tensor.Int64,
	"<f2": tensor.Float16, "<f4": tensor.Float32, "<f8": tensor.Float64,
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// parseNPY reads an .npy file as a tensor [1, shape...] (a scalar: [1]).
func parseNPY(data []byte) (tensor.Tensor, error) {
	if len(data) < 10 || string(data[:6]) != "\x93NUMPY" {
		return tensor.Tensor{}, format.Corrupt("npy: no \\x93NUMPY magic")
	}
	var hlen, start int
	switch data[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(data[8:])), 10
	case 2, 3:
		if len(data) < 12 {
			return tensor.Tensor{}, format.Corrupt("npy: header cut off")
		}
		hlen, start = int(binary.LittleEndian.Uint32(data[8:])), 12
	default:
		return tensor.Tensor{}, format.Corrupt("npy: version %d.%d", data[6], data[7])
	}
	if hlen > len(data)-start {
		return tensor.Tensor{}, format.Corrupt("npy: a header of %d bytes in %d", hlen, len(data)-start)
	}
	header := string(data[start : start+hlen])
	descr, fortran, shape := npyDescr.FindStringSubmatch(header), npyFortran.FindStringSubmatch(header), npyShape.FindStringSubmatch(header)
	if descr == nil || fortran == nil || shape == nil {
		return tensor.Tensor{}, format.Corrupt("npy: header %q lacks descr, fortran_order or shape", truncate([]byte(header)))
	}
	dt, ok := npyDTypes[descr[1]]
	if !ok {
		return tensor.Tensor{}, format.Corrupt("npy: dtype %q is not one of bool, (u)int8, little-endian int16/32/64 or float16/32/64", descr[1])
	}
	if fortran[1] == "True" {
		return tensor.Tensor{}, format.Corrupt("npy: a Fortran-order array (save it C-ordered: numpy.ascontiguousarray)")
	}
	dims := tensor.Shape{1}
	body := int64(len(data) - start - hlen)
	n := int64(dt.Size())
	for _, f := range strings.Split(shape[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil || d < 0 || d > 0 && n > body/d {
			return tensor.Tensor{}, format.Corrupt("npy: shape (%s) does not fit %d bytes of data", shape[1], body)
		}
		n *= d
		dims = append(dims, int(d))
	}
	if n != body {
		return tensor.Tensor{}, format.Corrupt("npy: shape (%s) of %s is %d bytes, the data %d", shape[1], descr[1], n, body)
	}
	// A copy: the member's bytes are not aligned for the dtype's elements.
	t, err := tensor.Zeros(dt, dims)
	if err != nil {
		return tensor.Tensor{}, format.Corrupt("npy: %v", err)
	}
	copy(t.Bytes(), data[start+hlen:])
	return t, nil
}
