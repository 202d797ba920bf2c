package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/tensor"
)

// normalize makes float32 images in [0, 1] of uint8 ones, and refuses
// anything else; --map names only built-in maps.
func TestNormalize(t *testing.T) {
	s := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 3}, []uint8{0, 51, 255})}}
	out, err := normalize(s)
	require.NoError(t, err)
	v, err := tensor.View[float32](out[0].Tensor)
	require.NoError(t, err)
	require.Equal(t, []float32{0, 0.2, 1}, v)
	require.Equal(t, tensor.Shape{1, 3}, out[0].Tensor.Shape())
	_, err = normalize(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{1})}})
	require.ErrorContains(t, err, "not uint8")
	_, err = mapNamed("sharpen")
	require.ErrorContains(t, err, "want one of normalize")
}
