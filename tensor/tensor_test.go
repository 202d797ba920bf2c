package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/tensor"
)

func TestDTypeNamesRoundTrip(t *testing.T) {
	for _, d := range []tensor.DType{tensor.Bool, tensor.Uint8, tensor.Int8, tensor.Int16, tensor.Int32,
		tensor.Int64, tensor.Float16, tensor.Float32, tensor.Float64} {
		got, err := tensor.ParseDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, got)
		assert.Positive(t, d.Size())
	}
	_, err := tensor.ParseDType("complex64")
	assert.ErrorIs(t, err, tensor.ErrDType)
	assert.Equal(t, 2, tensor.Float16.Size())
	assert.Equal(t, 8, tensor.Int64.Size())
}

func TestShapeMatchesWildcards(t *testing.T) {
	cases := []struct {
		declared, actual tensor.Shape
		ok               bool
	}{
		{tensor.Shape{-1, 784}, tensor.Shape{32, 784}, true},
		{tensor.Shape{-1, 784}, tensor.Shape{32, 783}, false},
		{tensor.Shape{-1, -1}, tensor.Shape{1, 2}, true},
		{tensor.Shape{-1}, tensor.Shape{1, 2}, false}, // rank differs
		{tensor.Shape{}, tensor.Shape{}, true},
		{tensor.Shape{3, 0}, tensor.Shape{3, 0}, true},
	}
	for _, c := range cases {
		assert.Equal(t, c.ok, c.declared.Matches(c.actual), "%v vs %v", c.declared, c.actual)
	}
	s, err := tensor.ParseShape("[-1, 28, 28]")
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{-1, 28, 28}, s)
	s, err = tensor.ParseShape("1x28x28")
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{1, 28, 28}, s)
	_, err = tensor.ParseShape("[1,-2]")
	assert.ErrorIs(t, err, tensor.ErrShape)
}

func TestViewsAliasStorage(t *testing.T) {
	vals := []float32{1, 2, 3, 4, 5, 6}
	x := tensor.MustFromSlice(tensor.Shape{2, 3}, vals)
	v, err := tensor.View[float32](x)
	require.NoError(t, err)
	v[4] = 42
	assert.Equal(t, float32(42), vals[4], "FromSlice and View must not copy")
	assert.Equal(t, []byte{0, 0, 0x28, 0x42}, x.Bytes()[16:20], "storage is little-endian")

	_, err = tensor.View[int32](x)
	assert.ErrorIs(t, err, tensor.ErrDType)

	_, err = tensor.FromSlice(tensor.Shape{4, 2}, vals)
	assert.ErrorIs(t, err, tensor.ErrShape)

	h := tensor.MustFromSlice(tensor.Shape{2}, []tensor.Half{tensor.HalfFrom(1.5), tensor.HalfFrom(-2)})
	assert.Equal(t, tensor.Float16, h.DType())
	hv, err := tensor.View[tensor.Half](h)
	require.NoError(t, err)
	assert.Equal(t, float32(-2), hv[1].Float32())
}

func TestZerosAndRowSlices(t *testing.T) {
	z, err := tensor.Zeros(tensor.Int64, tensor.Shape{4, 2})
	require.NoError(t, err)
	v, err := tensor.View[int64](z)
	require.NoError(t, err)
	for i := range v {
		v[i] = int64(i)
	}
	r, err := z.SliceRows(1, 3)
	require.NoError(t, err)
	rv, err := tensor.View[int64](r)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3, 4, 5}, rv)
	_, err = z.SliceRows(3, 5)
	assert.ErrorIs(t, err, tensor.ErrShape)
	_, err = tensor.Zeros(tensor.Float32, tensor.Shape{-1, 3})
	assert.ErrorIs(t, err, tensor.ErrShape)
}

// The LoD validity cases of PaddlePaddle Fluid's README.
func TestLoDValidateSeedRules(t *testing.T) {
	valid := []struct {
		lod    tensor.LoD
		height int
	}{
		{nil, 7},
		{tensor.LoD{{0, 2, 5}}, 5},
		{tensor.LoD{{0, 2, 3}, {0, 2, 5, 8}}, 8},
		{tensor.LoD{{0, 0, 3}}, 3}, // an empty sequence is allowed: non-descending
	}
	for _, c := range valid {
		assert.NoError(t, c.lod.Validate(c.height), "%v", c.lod)
	}
	invalid := []struct {
		name   string
		lod    tensor.LoD
		height int
	}{
		{"level does not start at 0", tensor.LoD{{1, 2, 5}}, 5},
		{"fewer than two offsets", tensor.LoD{{0}}, 0},
		{"descending", tensor.LoD{{0, 3, 2, 5}}, 5},
		{"higher level's last offset is not the next level's count-1", tensor.LoD{{0, 2, 4}, {0, 2, 5, 8}}, 8},
		{"lowest level does not end at the height", tensor.LoD{{0, 2, 5}}, 6},
	}
	for _, c := range invalid {
		assert.ErrorIs(t, c.lod.Validate(c.height), tensor.ErrLoD, c.name)
	}
}

func TestLoDLengthsConversion(t *testing.T) {
	lod, err := tensor.LoDFromLengths([][]int{{2, 3}})
	require.NoError(t, err)
	assert.Equal(t, tensor.LoD{{0, 2, 5}}, lod)
	assert.Equal(t, [][]int{{2, 3}}, lod.Lengths())
	nested := tensor.LoD{{0, 2, 3}, {0, 2, 5, 8}}
	back, err := tensor.LoDFromLengths(nested.Lengths())
	require.NoError(t, err)
	assert.True(t, nested.Equal(back))
	_, err = tensor.LoDFromLengths([][]int{{2, -1}})
	assert.ErrorIs(t, err, tensor.ErrLoD)
}

func seq(t *testing.T, lod tensor.LoD, rows []int64) tensor.LoDTensor {
	t.Helper()
	x, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{len(rows), 1}, rows), lod)
	require.NoError(t, err)
	return x
}

func TestConcatJoinsLoDByShiftingOffsets(t *testing.T) {
	a := seq(t, tensor.LoD{{0, 3, 5}}, []int64{1, 2, 3, 4, 5})
	b := seq(t, tensor.LoD{{0, 2, 6}}, []int64{6, 7, 8, 9, 10, 11})
	batch, err := tensor.Concat([]tensor.Slots{{a}, {b}})
	require.NoError(t, err)
	assert.Equal(t, tensor.LoD{{0, 3, 5, 7, 11}}, batch[0].LoD)
	assert.Equal(t, tensor.Shape{11, 1}, batch[0].Shape())
	require.NoError(t, batch[0].LoD.Validate(batch[0].Rows()))
	vals, err := tensor.View[int64](batch[0].Tensor)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, vals)

	// Split cuts by top-level sequence: 4 instances, rebased offsets.
	parts, err := tensor.Split(batch)
	require.NoError(t, err)
	require.Len(t, parts, 4)
	assert.Equal(t, tensor.LoD{{0, 4}}, parts[3][0].LoD)
	v3, err := tensor.View[int64](parts[3][0].Tensor)
	require.NoError(t, err)
	assert.Equal(t, []int64{8, 9, 10, 11}, v3)
}

func TestConcatNestedLoD(t *testing.T) {
	a := seq(t, tensor.LoD{{0, 2}, {0, 1, 3}}, []int64{1, 2, 3})
	b := seq(t, tensor.LoD{{0, 1}, {0, 2}}, []int64{4, 5})
	batch, err := tensor.Concat([]tensor.Slots{{a}, {b}})
	require.NoError(t, err)
	assert.Equal(t, tensor.LoD{{0, 2, 3}, {0, 1, 3, 5}}, batch[0].LoD)
	require.NoError(t, batch[0].LoD.Validate(5))
	parts, err := tensor.Split(batch)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	assert.True(t, parts[0][0].Equal(a), "got %v", parts[0][0])
	assert.True(t, parts[1][0].Equal(b), "got %v", parts[1][0])
}

func TestConcatSplitRoundTripImages(t *testing.T) {
	var instances []tensor.Slots
	for i := range 5 {
		img := make([]uint8, 28*28)
		img[0] = uint8(i)
		instances = append(instances, tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})},
		})
	}
	batch, err := tensor.Concat(instances)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{5, 28, 28}, batch[0].Shape())
	assert.Equal(t, tensor.Shape{5}, batch[1].Shape())
	back, err := tensor.Split(batch)
	require.NoError(t, err)
	require.Len(t, back, 5)
	for i := range instances {
		assert.True(t, back[i].Equal(instances[i]), "instance %d", i)
	}
}

func TestConcatErrorsNameSlotAndShapes(t *testing.T) {
	a := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{1, 2})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 3}, []float32{1, 2, 3})},
	}
	b := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{1, 2})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{1, 2})},
	}
	_, err := tensor.Concat([]tensor.Slots{a, b})
	require.ErrorIs(t, err, tensor.ErrShape)
	assert.Contains(t, err.Error(), "slot 1")
	assert.Contains(t, err.Error(), "[1,2]")
	assert.Contains(t, err.Error(), "[1,3]")

	c := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float64{1, 2})},
		b[1],
	}
	_, err = tensor.Concat([]tensor.Slots{a, c})
	require.ErrorIs(t, err, tensor.ErrDType)
	assert.Contains(t, err.Error(), "slot 0")

	_, err = tensor.Concat([]tensor.Slots{a, a[:1]})
	assert.ErrorIs(t, err, tensor.ErrShape)
	_, err = tensor.Concat(nil)
	assert.ErrorIs(t, err, tensor.ErrShape)
}

func TestSliceDisagreeingSlots(t *testing.T) {
	s := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []int32{1, 2})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{3}, []int32{1, 2, 3})},
	}
	_, err := tensor.Split(s)
	assert.ErrorIs(t, err, tensor.ErrShape)
}

func allDTypes() tensor.Slots {
	lod := tensor.LoD{{0, 1, 3}}
	seqT, _ := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{3, 2}, []float32{1, 2, 3, 4, 5, 6}), lod)
	return tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []bool{true, false})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 3}, []uint8{1, 2, 255})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int8{-5})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []int16{-300, 300})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int32{-1 << 30})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{1 << 40})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []tensor.Half{tensor.HalfFrom(0.5)})},
		seqT,
		{Tensor: tensor.MustFromSlice(tensor.Shape{0, 4}, []float64{})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{}, []float64{3.25})},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	s := allDTypes()
	b, err := tensor.Encode(s)
	require.NoError(t, err)
	assert.Len(t, b, tensor.EncodedSize(s))
	got, err := tensor.Decode(b)
	require.NoError(t, err)
	require.True(t, got.Equal(s), "decoded %v", got)
	// Decoded storage is a copy: clobbering the input changes nothing.
	for i := range b {
		b[i] = 0xff
	}
	assert.True(t, got.Equal(allDTypes()))
	// Typed views of decoded tensors are aligned.
	_, err = tensor.View[int64](got[5].Tensor)
	require.NoError(t, err)
	_, err = tensor.View[float64](got[9].Tensor)
	require.NoError(t, err)
}

func TestDecodeRejectsMalformedInput(t *testing.T) {
	good, err := tensor.Encode(allDTypes())
	require.NoError(t, err)
	for cut := 0; cut < len(good); cut++ {
		_, err := tensor.Decode(good[:cut])
		require.ErrorIs(t, err, tensor.ErrMalformed, "cut at %d", cut)
	}
	_, err = tensor.Decode(append(append([]byte{}, good...), 0))
	assert.ErrorContains(t, err, "trailing")

	bad := append([]byte{}, good...)
	bad[0] = 'X'
	_, err = tensor.Decode(bad)
	assert.ErrorContains(t, err, "magic")

	bad = append([]byte{}, good...)
	bad[4] = 9
	_, err = tensor.Decode(bad)
	assert.ErrorContains(t, err, "version")

	// A shape that disagrees with its data length.
	one, err := tensor.Encode(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{2}, []int32{1, 2})}})
	require.NoError(t, err)
	one[12] = 3 // dim 0: 2 -> 3
	_, err = tensor.Decode(one)
	assert.ErrorIs(t, err, tensor.ErrShape)
	var de *tensor.DecodeError
	require.True(t, errors.As(err, &de))
	assert.Positive(t, de.Offset)
}

func FuzzDecode(f *testing.F) {
	good, _ := tensor.Encode(allDTypes())
	f.Add(good)
	f.Add([]byte("AFTS\x01\x00\xff\xff"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := tensor.Decode(b)
		if err != nil {
			if !errors.Is(err, tensor.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		// Whatever decodes must re-encode to the same bytes.
		again, err := tensor.Encode(s)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
		if s.Bytes() > len(b) {
			t.Fatalf("decoded %d data bytes from %d input bytes", s.Bytes(), len(b))
		}
	})
}

func TestConcatIntoReusesStorage(t *testing.T) {
	mk := func(v uint8) tensor.Slots {
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 3}, []uint8{v, v, v})}}
	}
	first, err := tensor.Concat([]tensor.Slots{mk(1), mk(2)})
	require.NoError(t, err)
	base := &first[0].Bytes()[0]
	second, err := tensor.ConcatInto(first, []tensor.Slots{mk(3), mk(4)})
	require.NoError(t, err)
	assert.Same(t, base, &second[0].Bytes()[0], "storage reused")
	assert.Equal(t, []byte{3, 3, 3, 4, 4, 4}, second[0].Bytes())
	// Too small to reuse: a fresh allocation, same result as Concat.
	third, err := tensor.ConcatInto(second, []tensor.Slots{mk(5), mk(6), mk(7)})
	require.NoError(t, err)
	want, _ := tensor.Concat([]tensor.Slots{mk(5), mk(6), mk(7)})
	assert.True(t, third.Equal(want))
	_, err = tensor.View[uint8](third[0].Tensor)
	require.NoError(t, err)
}

func TestFromBytesCopiesShapeWrapBytesKeepsIt(t *testing.T) {
	data := make([]byte, 24)
	shape := tensor.Shape{2, 3}
	copied, err := tensor.FromBytes(tensor.Int32, shape, data)
	require.NoError(t, err)
	kept, err := tensor.WrapBytes(tensor.Int32, shape, data)
	require.NoError(t, err)
	shape[0] = 7
	require.Equal(t, tensor.Shape{2, 3}, copied.Shape())
	require.Equal(t, tensor.Shape{7, 3}, kept.Shape(), "WrapBytes keeps the caller's slice")
	_, err = tensor.WrapBytes(tensor.Int32, tensor.Shape{2, 2}, data)
	require.ErrorIs(t, err, tensor.ErrShape)
	_, err = tensor.WrapBytes(tensor.Int32, tensor.Shape{-1, 6}, data)
	require.ErrorIs(t, err, tensor.ErrShape)
}

// Found by messages.FuzzBatch: an instance without slots first used to make
// an empty batch of the others.
func TestConcatRefusesDifferentSlotCounts(t *testing.T) {
	one := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int32{1})}}
	for _, instances := range [][]tensor.Slots{{{}, one}, {one, {}}} {
		_, err := tensor.Concat(instances)
		require.ErrorIs(t, err, tensor.ErrShape)
	}
}

// Where recycled storage is too small, ConcatAlloc takes a slot's storage
// from the allocator, unless what it gives is too small or unaligned.
func TestConcatAllocTakesTheAllocatorsStorage(t *testing.T) {
	mk := func(v uint8) tensor.Slots {
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 3}, []uint8{v, v, v})}}
	}
	insts := []tensor.Slots{mk(1), mk(2)}
	want, err := tensor.Concat(insts)
	require.NoError(t, err)
	block := make([]byte, 64)
	for _, c := range []struct {
		name  string
		give  []byte
		fresh bool
	}{{"given", block, false}, {"too small", block[:5], true}, {"unaligned", block[1:], true}, {"none", nil, true}} {
		var asked []int
		got, err := tensor.ConcatAlloc(nil, insts, func(size int) []byte { asked = append(asked, size); return c.give })
		require.NoError(t, err, c.name)
		assert.Equal(t, []int{6}, asked, c.name)
		assert.True(t, got.Equal(want), c.name)
		if c.fresh {
			assert.NotSame(t, &block[0], &got[0].Bytes()[0], c.name)
		} else {
			assert.Same(t, &block[0], &got[0].Bytes()[0], "%s: made in the allocator's storage", c.name)
		}
	}
}
