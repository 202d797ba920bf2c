package actors

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// A dropped row leaves its cut, or the padding when it was padding; the
// positions stay.
func TestPlaceWithoutDroppedRows(t *testing.T) {
	b := &messages.Batch{Ids: make([]uint64, 12), Cuts: []uint32{4, 4, 4}, Positions: 12}
	pad, cuts := placeWithout(b, []int{1, 5, 6, 11})
	require.Zero(t, pad)
	require.Equal(t, []uint32{3, 2, 3}, cuts)
	require.Equal(t, []uint32{4, 4, 4}, b.Cuts, "the item's own cuts stay")
	pad, cuts = placeWithout(b, []int{0, 1, 2, 3})
	require.Equal(t, []uint32{0, 4, 4}, cuts)
	require.Zero(t, pad)
	b = &messages.Batch{Ids: make([]uint64, 8), Padding: 3, Positions: 8}
	pad, cuts = placeWithout(b, []int{0, 6, 7})
	require.EqualValues(t, 1, pad)
	require.Nil(t, cuts)
}

// The map's own tensor is compacted where it lies (its storage may be
// recycled or the device's); a slot that shares the item's storage is
// copied, and the item is left as it was, for a replay.
func TestDropSamplesCompactsOnlyWhatTheMapMade(t *testing.T) {
	labels := tensor.MustFromSlice(tensor.Shape{5}, []int64{10, 11, 12, 13, 14})
	in := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{5, 2}, []uint8{0, 0, 1, 1, 2, 2, 3, 3, 4, 4})}, {Tensor: labels}}
	made := tensor.MustFromSlice(tensor.Shape{5, 2}, []float32{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5})
	out := tensor.Slots{{Tensor: made}, in[1]}
	bad := &format.BadSamples{Rows: []int{1, 3}, Errs: []error{errors.New("a"), errors.New("b")}}
	res, ids, err := dropSamples(in, out, []uint64{100, 101, 102, 103, 104}, bad)
	require.NoError(t, err)
	require.Equal(t, []uint64{100, 102, 104}, ids)
	v, err := tensor.View[float32](res[0].Tensor)
	require.NoError(t, err)
	require.Equal(t, []float32{0, 0.5, 2, 2.5, 4, 4.5}, v)
	require.Equal(t, unsafe.SliceData(made.Bytes()), unsafe.SliceData(res[0].Bytes()), "compacted in place")
	l, err := tensor.View[int64](res[1].Tensor)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 12, 14}, l)
	orig, err := tensor.View[int64](labels)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 11, 12, 13, 14}, orig, "the item's labels untouched")

	for _, rows := range [][]int{{3, 1}, {1, 1}, {5}, {-1}} {
		_, _, err := dropSamples(in, out, []uint64{1, 2, 3, 4, 5}, &format.BadSamples{Rows: rows, Errs: make([]error, len(rows))})
		require.ErrorContains(t, err, "want them ascending", "%v", rows)
	}
	_, _, err = dropSamples(in, out[:1], []uint64{1, 2, 3}, bad)
	require.ErrorContains(t, err, "3 samples")

	// An item already empty (its samples dropped by an earlier map), and
	// a map that says it had no bad samples, keep what they have.
	empty, err := out.Slice(0, 0)
	require.NoError(t, err)
	res, ids, err = dropSamples(empty, empty, nil, &format.BadSamples{})
	require.NoError(t, err)
	require.Empty(t, ids)
	n, err := res.Instances()
	require.NoError(t, err)
	require.Zero(t, n)
}
