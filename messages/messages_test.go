package messages_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

func slots(t *testing.T) tensor.Slots {
	t.Helper()
	words, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{5, 1}, []int64{1, 2, 3, 4, 5}), tensor.LoD{{0, 2, 5}})
	require.NoError(t, err)
	return tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{2, 3}, []float32{1, 2, 3, 4, 5, 6})},
		words,
	}
}

func TestFromSlotsSharesStorage(t *testing.T) {
	s := slots(t)
	b, err := messages.FromSlots(s, []uint64{messages.SampleID(1, 7), messages.SampleID(2, 9)})
	require.NoError(t, err)
	require.Equal(t, unsafe.SliceData(s[0].Bytes()), unsafe.SliceData(b.Slots[0].Data), "in process, no copy")
	back, err := b.ToSlots()
	require.NoError(t, err)
	require.True(t, s.Equal(back))
	require.Equal(t, unsafe.SliceData(s[0].Bytes()), unsafe.SliceData(back[0].Bytes()))
}

func TestWireRoundTrip(t *testing.T) {
	s := slots(t)
	b, err := messages.FromSlots(s, []uint64{1, 2})
	require.NoError(t, err)
	b.Epoch, b.Seq, b.Pass = 3, 4, 5
	wire, err := proto.Marshal(b)
	require.NoError(t, err)
	var got messages.Batch
	require.NoError(t, proto.Unmarshal(wire, &got))
	back, err := got.ToSlots()
	require.NoError(t, err)
	require.True(t, s.Equal(back))
	require.Equal(t, []uint64{1, 2}, got.Ids)
	require.EqualValues(t, 4, got.Seq)
}

func TestIDsMustMatchInstances(t *testing.T) {
	_, err := messages.FromSlots(slots(t), []uint64{1})
	require.ErrorIs(t, err, messages.ErrInvalid)
	b, err := messages.FromSlots(slots(t), []uint64{1, 2})
	require.NoError(t, err)
	b.Ids = b.Ids[:1]
	_, err = b.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
}

func TestHostileShapesAreRefused(t *testing.T) {
	for name, tn := range map[string]*messages.Tensor{
		"negative":   {Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{-1}, Data: []byte{1}},
		"overflow":   {Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{1 << 40, 1 << 40, 1 << 40}, Data: []byte{1}},
		"too big":    {Dtype: messages.DType_DTYPE_FLOAT32, Shape: []int64{1000}, Data: make([]byte, 8)},
		"bad dtype":  {Dtype: 99, Shape: []int64{1}, Data: []byte{1}},
		"bad lod":    {Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{2}, Data: []byte{1, 2}, Lod: []*messages.Level{{Offsets: []int64{0, 5}}}},
		"short data": {Dtype: messages.DType_DTYPE_INT64, Shape: []int64{1}, Data: []byte{1, 2, 3}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := (&messages.Batch{Slots: []*messages.Tensor{tn}, Ids: []uint64{1}}).ToSlots()
			require.ErrorIs(t, err, messages.ErrInvalid)
		})
	}
}

func TestSampleID(t *testing.T) {
	f, r := messages.SplitID(messages.SampleID(123, 456789))
	require.Equal(t, 123, f)
	require.Equal(t, 456789, r)
	f, r = messages.SplitID(messages.SampleID(messages.MaxFiles-1, messages.MaxRecords-1))
	require.Equal(t, messages.MaxFiles-1, f)
	require.Equal(t, messages.MaxRecords-1, r)
}

// FuzzBatch decodes arbitrary bytes as a wire Batch and converts it: an error
// or slots that pass the shape rules, never a panic or a huge allocation.
func FuzzBatch(f *testing.F) {
	b, _ := messages.FromSlots(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{2, 2}, []int32{1, 2, 3, 4})}}, []uint64{1, 2})
	wire, _ := proto.Marshal(b)
	f.Add(wire)
	parted, _ := messages.FromParts([]tensor.Slots{
		{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []int32{1, 2})}},
		{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []int32{3, 4})}},
	}, []uint64{1, 2})
	wire, _ = proto.Marshal(parted)
	f.Add(wire)
	refs, _ := parted.Refs(nil)
	gathered, _ := messages.Gather([]messages.Ref{refs[1], refs[0], refs[1]}, []uint64{2, 1, 3})
	wire, _ = proto.Marshal(gathered)
	f.Add(wire)
	seqs, _ := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{3}, []uint8{1, 2, 3}), tensor.LoD{{0, 1, 1, 3}})
	stacked, _ := messages.FromParts([]tensor.Slots{{seqs}}, []uint64{1, 2, 3})
	refs, _ = stacked.Refs(nil)
	gathered, _ = messages.Gather([]messages.Ref{refs[2], refs[0]}, []uint64{3, 1})
	wire, _ = proto.Marshal(gathered)
	f.Add(wire)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m messages.Batch
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		if refs, err := m.Refs(nil); err == nil && len(refs) != len(m.Ids) {
			t.Fatalf("%d instances for %d ids", len(refs), len(m.Ids))
		}
		s, err := m.ToSlots()
		if err != nil {
			return
		}
		n, err := s.Instances()
		if err != nil || n != len(m.Ids) {
			t.Fatalf("converted slots with %d instances (%v) for %d ids", n, err, len(m.Ids))
		}
	})
}
