package main

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/vision"
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
	require.ErrorContains(t, err, "want one of normalize, to_tensor")
}

// to_tensor gives images a channel axis, as float32 [B, C, H, W] in
// [0, 1] (an [B, H, W, C] batch transposed), and integer labels int64.
func TestToTensor(t *testing.T) {
	gray := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{2, 1, 2}, []uint8{0, 255, 51, 102})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []uint8{3, 9})}}
	out, err := toTensor(gray)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 1, 1, 2}, out[0].Tensor.Shape())
	v, _ := tensor.View[float32](out[0].Tensor)
	require.Equal(t, []float32{0, 1, 0.2, 0.4}, v)
	labels, err := tensor.View[int64](out[1].Tensor)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 9}, labels)

	// One image of 1x2 pixels of 3 channels, and int32 labels.
	rgb := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1, 2, 3}, []uint8{0, 51, 102, 153, 204, 255})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int32{-1})}}
	out, err = toTensor(rgb)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{1, 3, 1, 2}, out[0].Tensor.Shape())
	v, _ = tensor.View[float32](out[0].Tensor)
	require.Equal(t, []float32{0, 0.6, 0.2, 0.8, 0.4, 1}, v, "channel planes, each in pixel order")
	labels, _ = tensor.View[int64](out[1].Tensor)
	require.Equal(t, []int64{-1}, labels)

	_, err = toTensor(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{4}, []uint8{1, 2, 3, 4})}})
	require.ErrorContains(t, err, "not uint8 images")
}

// A decode map that calls TurboJPEG leaves the process twice the Ps it
// started with (spareProcs), unless the user set GOMAXPROCS; checking
// the map's parameters changes nothing.
func TestDecodeMapsSpareProcs(t *testing.T) {
	if err := vision.TurboJPEG(); err != nil {
		require.Empty(t, os.Getenv("CI"), "CI installs libturbojpeg0: %v", err)
		t.Skip(err)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set: the user's value stands")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(startProcs))
	spareOnce = sync.Once{} // as a process starts: a test before may have run a decode map
	require.NoError(t, checkMap("decode(size=8)"))
	require.Equal(t, startProcs, runtime.GOMAXPROCS(0))
	_, err := sampleMaps("decode(size=8)")
	require.NoError(t, err)
	require.Equal(t, 2*startProcs, runtime.GOMAXPROCS(0))
}
