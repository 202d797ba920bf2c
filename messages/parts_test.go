package messages_test

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// records are Fashion-MNIST-like instances: a [1,2,2] uint8 image and a
// [1,1] int64 label, each in its own storage as a decoded record is.
func records(n int) []tensor.Slots {
	out := make([]tensor.Slots, n)
	for i := range out {
		b := uint8(4 * i)
		out[i] = tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2, 2}, []uint8{b, b + 1, b + 2, b + 3})},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(i)})},
		}
	}
	return out
}

func ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = messages.SampleID(0, i)
	}
	return out
}

func TestFromPartsSharesStorageAndJoinsOnce(t *testing.T) {
	recs := records(5)
	b, err := messages.FromParts(recs, ids(5))
	require.NoError(t, err)
	require.Len(t, b.Parts, 5)
	require.Empty(t, b.Slots)
	for i, p := range b.Parts {
		require.Same(t, unsafe.SliceData(recs[i][0].Bytes()), unsafe.SliceData(p.Slots[0].Data), "no copy into the message")
	}
	got, err := b.ToSlots()
	require.NoError(t, err)
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	require.True(t, want.Equal(got), "joined %v, want %v", got, want)
	require.NotSame(t, unsafe.SliceData(recs[0][0].Bytes()), unsafe.SliceData(got[0].Bytes()), "the join owns its storage")
}

func TestOnePartIsUsedInPlace(t *testing.T) {
	recs := records(1)
	b, err := messages.FromParts(recs, ids(1))
	require.NoError(t, err)
	got, err := b.ToSlots()
	require.NoError(t, err)
	require.True(t, recs[0].Equal(got))
	require.Same(t, unsafe.SliceData(recs[0][0].Bytes()), unsafe.SliceData(got[0].Bytes()))
}

func TestRefsAndGather(t *testing.T) {
	recs := records(4)
	whole, err := tensor.Concat(recs)
	require.NoError(t, err)
	contiguous, err := messages.FromSlots(whole, ids(4))
	require.NoError(t, err)
	parted, err := messages.FromParts(recs, ids(4))
	require.NoError(t, err)
	for name, b := range map[string]*messages.Batch{"contiguous": contiguous, "parts": parted} {
		t.Run(name, func(t *testing.T) {
			refs, err := b.Refs(nil)
			require.NoError(t, err)
			require.Len(t, refs, 4)
			// In order, the instances are the parts': no rows needed.
			same, err := messages.Gather(refs, ids(4))
			require.NoError(t, err)
			require.Empty(t, same.Rows)
			// Reversed and regrouped, the instances come back in the new
			// order, and the item names each part once, sharing it. Rows
			// are needed only to pick out of a part of several instances.
			rev, err := messages.Gather([]messages.Ref{refs[3], refs[2], refs[1], refs[0]}, []uint64{3, 2, 1, 0})
			require.NoError(t, err)
			require.Equal(t, len(b.Parts) == 0, len(rev.Rows) == 4)
			for _, p := range rev.Parts {
				require.Contains(t, append(b.Parts, refs[0].Part), p)
			}
			want, err := tensor.Concat([]tensor.Slots{recs[3], recs[2], recs[1], recs[0]})
			require.NoError(t, err)
			got, err := rev.ToSlots()
			require.NoError(t, err)
			require.True(t, want.Equal(got))
			// The same through the wire, and through Refs again.
			wire, err := proto.Marshal(rev)
			require.NoError(t, err)
			var back messages.Batch
			require.NoError(t, proto.Unmarshal(wire, &back))
			got, err = back.ToSlots()
			require.NoError(t, err)
			require.True(t, want.Equal(got))
			again, err := rev.Refs(nil)
			require.NoError(t, err)
			got, err = messages.JoinRefs(again[1:3], nil)
			require.NoError(t, err)
			want, err = tensor.Concat([]tensor.Slots{recs[2], recs[1]})
			require.NoError(t, err)
			require.True(t, want.Equal(got))
		})
	}
}

// A part may hold a run of instances (a file reader's stacked group); a
// gather picks single rows out of it without splitting it.
func TestGatherRowsOfARun(t *testing.T) {
	recs := records(6)
	first, err := tensor.Concat(recs[:4])
	require.NoError(t, err)
	b, err := messages.FromParts([]tensor.Slots{first, recs[4], recs[5]}, ids(6))
	require.NoError(t, err)
	require.Len(t, b.Parts, 3)
	refs, err := b.Refs(nil)
	require.NoError(t, err)
	pick := []messages.Ref{refs[5], refs[2], refs[0], refs[4]}
	g, err := messages.Gather(pick, []uint64{5, 2, 0, 4})
	require.NoError(t, err)
	require.Equal(t, []uint32{0, 3, 1, 5}, g.Rows, "parts in order of first use: recs[5] (row 0), the run (rows 1-4), recs[4] (row 5)")
	got, err := g.ToSlots()
	require.NoError(t, err)
	want, err := tensor.Concat([]tensor.Slots{recs[5], recs[2], recs[0], recs[4]})
	require.NoError(t, err)
	require.True(t, want.Equal(got))
	require.NotSame(t, unsafe.SliceData(first[0].Bytes()), unsafe.SliceData(got[0].Bytes()), "the join owns its storage")
}

// Rows picked at random out of parts of several sizes (stacked groups,
// some cut short, one empty) name the instances they were gathered from.
func TestRowsOfPartsOfManySizes(t *testing.T) {
	sizes := []int{8, 8, 3, 0, 8, 8, 5, 8, 1, 8}
	recs := records(57)
	var parts []tensor.Slots
	at := 0
	for _, n := range sizes {
		if n == 0 {
			parts = append(parts, tensor.Slots{
				{Tensor: tensor.MustFromSlice(tensor.Shape{0, 2, 2}, []uint8{})},
				{Tensor: tensor.MustFromSlice(tensor.Shape{0, 1}, []int64{})},
			})
			continue
		}
		part, err := tensor.Concat(recs[at : at+n])
		require.NoError(t, err)
		parts, at = append(parts, part), at+n
	}
	b, err := messages.FromParts(parts, ids(at))
	require.NoError(t, err)
	refs, err := b.Refs(nil)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := make([]messages.Ref, at)
	b.Rows = make([]uint32, at)
	for i, k := range rng.Perm(at) {
		pick[i], b.Rows[i] = refs[k], uint32(k)
	}
	again, err := b.Refs(nil)
	require.NoError(t, err)
	require.Equal(t, pick, again)
}

func TestBadRows(t *testing.T) {
	b, err := messages.FromParts(records(3), ids(3))
	require.NoError(t, err)
	b.Rows = []uint32{0, 1}
	_, err = b.Refs(nil)
	require.ErrorIs(t, err, messages.ErrInvalid, "one row per id")
	b.Rows = []uint32{0, 1, 3}
	_, err = b.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid, "a row past the parts")
	b.Rows = []uint32{2, 2, 0}
	s, err := b.ToSlots()
	require.NoError(t, err, "a row may be named twice")
	n, err := s.Instances()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = messages.Gather([]messages.Ref{{Part: b.Parts[0], Row: 1}}, ids(1))
	require.ErrorIs(t, err, messages.ErrInvalid, "a row past its part")
	_, err = messages.Gather([]messages.Ref{{Part: b.Parts[0]}}, ids(2))
	require.ErrorIs(t, err, messages.ErrInvalid, "one id per ref")
	_, err = messages.JoinRefs(nil, nil)
	require.ErrorIs(t, err, messages.ErrInvalid)
}

// LoD parts take the general path; the result equals tensor.Concat's.
func TestPartsWithLoD(t *testing.T) {
	seq := func(vals ...int64) tensor.Slots {
		lt, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{len(vals), 1}, vals), tensor.LoD{{0, len(vals)}})
		require.NoError(t, err)
		return tensor.Slots{lt}
	}
	recs := []tensor.Slots{seq(1, 2, 3), seq(4), seq(5, 6)}
	b, err := messages.FromParts(recs, ids(3))
	require.NoError(t, err)
	got, err := b.ToSlots()
	require.NoError(t, err)
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	require.True(t, want.Equal(got), "joined %v, want %v", got, want)
	require.Equal(t, tensor.LoD{{0, 3, 4, 6}}, got[0].LoD)
	refs, err := b.Refs(nil)
	require.NoError(t, err)
	rev, err := messages.Gather([]messages.Ref{refs[2], refs[0]}, ids(2))
	require.NoError(t, err)
	got, err = rev.ToSlots()
	require.NoError(t, err)
	want, err = tensor.Concat([]tensor.Slots{recs[2], recs[0]})
	require.NoError(t, err)
	require.True(t, want.Equal(got), "picked %v, want %v", got, want)
}

func TestPartsOverTheWire(t *testing.T) {
	recs := records(3)
	b, err := messages.FromParts(recs, ids(3))
	require.NoError(t, err)
	wire, err := proto.Marshal(b)
	require.NoError(t, err)
	var got messages.Batch
	require.NoError(t, proto.Unmarshal(wire, &got))
	s, err := got.ToSlots()
	require.NoError(t, err)
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	require.True(t, want.Equal(s))
}

func TestBadParts(t *testing.T) {
	recs := records(3)
	_, err := messages.FromParts(recs, ids(2))
	require.ErrorIs(t, err, messages.ErrInvalid, "ids must match")

	mismatch := records(2)
	mismatch[1][0] = tensor.LoDTensor{Tensor: tensor.MustFromSlice(tensor.Shape{1, 4}, []uint8{1, 2, 3, 4})}
	b, err := messages.FromParts(mismatch, ids(2))
	require.NoError(t, err, "each part is sound on its own")
	_, err = b.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, "joining instances")

	both, err := messages.FromParts(records(2), ids(2))
	require.NoError(t, err)
	both.Slots = both.Parts[0].Slots
	_, err = both.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
	_, err = both.Refs(nil)
	require.ErrorIs(t, err, messages.ErrInvalid)

	short, err := messages.FromParts(records(2), ids(2))
	require.NoError(t, err)
	short.Parts[1].Slots[0].Data = short.Parts[1].Slots[0].Data[:3]
	_, err = short.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid, "data shorter than its shape")

	hostile := &messages.Batch{Ids: ids(2), Parts: []*messages.Part{
		{Slots: []*messages.Tensor{{Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{1, 0}}}},
		{Slots: []*messages.Tensor{{Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{1 << 40, 1 << 40, 0}}}},
	}}
	_, err = hostile.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
}

// Found by FuzzBatch: parts without tensors carry no instances, whatever
// the ids say.
func TestPartsWithoutTensors(t *testing.T) {
	b := &messages.Batch{Ids: ids(2), Parts: []*messages.Part{{}, {}}}
	_, err := b.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
	_, err = b.Refs(nil)
	require.ErrorIs(t, err, messages.ErrInvalid)
}

func TestToSlotsIntoReusesStorage(t *testing.T) {
	big, err := tensor.Concat(records(8))
	require.NoError(t, err)
	old := unsafe.SliceData(big[0].Bytes())
	b, err := messages.FromParts(records(3), ids(3))
	require.NoError(t, err)
	got, err := b.ToSlotsInto(big)
	require.NoError(t, err)
	require.Same(t, old, unsafe.SliceData(got[0].Bytes()), "large enough: reused")
	want, err := tensor.Concat(records(3))
	require.NoError(t, err)
	require.True(t, want.Equal(got))

	small, err := tensor.Concat(records(1))
	require.NoError(t, err)
	got, err = b.ToSlotsInto(small)
	require.NoError(t, err)
	require.NotSame(t, unsafe.SliceData(small[0].Bytes()), unsafe.SliceData(got[0].Bytes()), "too small: fresh")
	require.True(t, want.Equal(got))
}

// Found by FuzzBatch: rows of size 0 cost no bytes, so a part can claim
// any number of instances; splitting it must not allocate for them.
func TestRefsBoundsInstancesByIDs(t *testing.T) {
	b := &messages.Batch{Ids: ids(1), Parts: []*messages.Part{{Slots: []*messages.Tensor{
		{Dtype: messages.DType_DTYPE_UINT8, Shape: []int64{1 << 40, 0}},
	}}}}
	_, err := b.Refs(nil)
	require.ErrorIs(t, err, messages.ErrInvalid)
	_, err = b.ToSlots()
	require.ErrorIs(t, err, messages.ErrInvalid)
	// With rows, the claimed instances cost nothing either: only the rows
	// named are joined.
	b.Rows = []uint32{1 << 31}
	s, err := b.ToSlots()
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{1, 0}, s[0].Shape())
}

// Past 32 parts, Gather finds parts through a map instead of a scan; the
// result is the same.
func TestGatherManyParts(t *testing.T) {
	recs := records(40)
	b, err := messages.FromParts(recs, ids(40))
	require.NoError(t, err)
	refs, err := b.Refs(nil)
	require.NoError(t, err)
	var picked []messages.Ref
	var want []tensor.Slots
	for i := 39; i >= 0; i -= 2 { // every other one, backwards, and the first twice
		picked, want = append(picked, refs[i]), append(want, recs[i])
	}
	picked, want = append(picked, refs[39]), append(want, recs[39])
	g, err := messages.Gather(picked, ids(len(picked)))
	require.NoError(t, err)
	require.Len(t, g.Parts, 20, "each part named once")
	got, err := g.ToSlots()
	require.NoError(t, err)
	w, err := tensor.Concat(want)
	require.NoError(t, err)
	require.True(t, w.Equal(got))
}

// Rows skip parts that hold no instances.
func TestRowsPastAnEmptyPart(t *testing.T) {
	recs := records(3)
	empty := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{0, 2, 2}, []uint8{})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{0, 1}, []int64{})},
	}
	b, err := messages.FromParts([]tensor.Slots{recs[0], empty, empty, recs[1], recs[2]}, ids(3))
	require.NoError(t, err)
	b.Rows = []uint32{2, 1, 0}
	got, err := b.ToSlots()
	require.NoError(t, err)
	want, err := tensor.Concat([]tensor.Slots{recs[2], recs[1], recs[0]})
	require.NoError(t, err)
	require.True(t, want.Equal(got))
}

// Refs finds the part of every row, whether the parts are all one size (a
// division) or not (a search), including sizes whose total looks uniform
// (2+1+3 = 3 parts of 2) and rows at every part's edges.
func TestRefsFindsEachRowsPart(t *testing.T) {
	for _, sizes := range [][]int{{4, 4, 4}, {1, 1, 1, 1}, {2, 1, 3}, {3, 3, 1}, {1, 5}, {6}} {
		recs := records(16)
		var parts []tensor.Slots
		type where struct{ part, row int }
		var owner []where
		next := 0
		for k, n := range sizes {
			block, err := tensor.Concat(recs[next : next+n])
			require.NoError(t, err)
			parts = append(parts, block)
			for r := range n {
				owner = append(owner, where{k, r})
			}
			next += n
		}
		b, err := messages.FromParts(parts, ids(next))
		require.NoError(t, err)
		rows := make([]uint32, next)
		for i := range rows {
			rows[i] = uint32(next - 1 - i) // every row once, backwards
		}
		b.Rows = rows
		refs, err := b.Refs(nil)
		require.NoError(t, err, "sizes %v", sizes)
		require.Len(t, refs, next)
		for i, ref := range refs {
			w := owner[rows[i]]
			require.Same(t, b.Parts[w.part], ref.Part, "sizes %v, row %d", sizes, rows[i])
			require.Equal(t, w.row, ref.Row, "sizes %v, row %d", sizes, rows[i])
		}
		got, err := b.ToSlots()
		require.NoError(t, err)
		want := make([]tensor.Slots, next)
		for i := range want {
			want[i] = recs[next-1-i]
		}
		w, err := tensor.Concat(want)
		require.NoError(t, err)
		require.True(t, w.Equal(got), "sizes %v", sizes)

		b.Rows[0] = uint32(next) // one past the last instance
		_, err = b.Refs(nil)
		require.ErrorIs(t, err, messages.ErrInvalid, "sizes %v", sizes)
	}
}

// Groups of sequences stacked by tensor.Stack (one level of offsets over
// many records) join, in any order and beside a dense slot, as Concat joins
// the records.
func TestStackedSequencesJoinAsConcat(t *testing.T) {
	rec := func(i int) tensor.Slots {
		vals := make([]uint8, i%5)
		for k := range vals {
			vals[k] = uint8(10*i + k)
		}
		seq, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{len(vals)}, vals), tensor.LoD{{0, len(vals)}})
		require.NoError(t, err)
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})}, seq}
	}
	var groups []tensor.Slots
	var recs []tensor.Slots
	st := tensor.NewStack(4)
	for i := range 10 {
		if !st.Append(rec(i)) { // full: the next group
			groups = append(groups, st.Take())
			require.True(t, st.Append(rec(i)))
		}
		recs = append(recs, rec(i))
	}
	groups = append(groups, st.Take())
	require.Len(t, groups, 3)
	b, err := messages.FromParts(groups, ids(10))
	require.NoError(t, err)
	refs, err := b.Refs(nil)
	require.NoError(t, err)
	order := []int{7, 0, 9, 3, 4, 1}
	picked := make([]messages.Ref, len(order))
	want := make([]tensor.Slots, len(order))
	for i, k := range order {
		picked[i], want[i] = refs[k], recs[k]
	}
	got, err := messages.JoinRefs(picked, nil)
	require.NoError(t, err)
	joined, err := tensor.Concat(want)
	require.NoError(t, err)
	require.True(t, joined.Equal(got), "joined %v, want %v", got, joined)

	// Offsets that do not cover the part's rows are not joined.
	bad := proto.Clone(b).(*messages.Batch)
	bad.Parts[0].Slots[1].Lod[0].Offsets[0] = 1
	badRefs, err := bad.Refs(nil)
	require.NoError(t, err)
	_, err = messages.JoinRefs(badRefs[:2], nil)
	require.ErrorIs(t, err, messages.ErrInvalid)
}
