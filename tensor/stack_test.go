package tensor_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/tensor"
)

// sample is a Fashion-MNIST-like record: a [1,2,2] uint8 image and a [1,1]
// int64 label.
func sample(i int) tensor.Slots {
	b := uint8(4 * i)
	return tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2, 2}, []uint8{b, b + 1, b + 2, b + 3})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(i)})},
	}
}

func encode(t testing.TB, s tensor.Slots) []byte {
	t.Helper()
	b, err := tensor.Encode(s)
	require.NoError(t, err)
	return b
}

func TestStackEqualsConcatOfDecoded(t *testing.T) {
	st := tensor.NewStack(4)
	var recs []tensor.Slots
	for i := range 4 {
		rec := encode(t, sample(i))
		out, err := st.AppendEncoded(rec)
		require.NoError(t, err)
		require.Nil(t, out, "stacked")
		recs = append(recs, sample(i))
		rec[len(rec)-1] = 0xff // the stack copied the record: its buffer may be reused
	}
	require.True(t, st.Full())
	// Full: the next record is decoded instead.
	out, err := st.AppendEncoded(encode(t, sample(9)))
	require.NoError(t, err)
	require.True(t, sample(9).Equal(out))

	row, err := st.Row(2)
	require.NoError(t, err)
	require.True(t, sample(2).Equal(row))

	got := st.Take()
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	require.True(t, want.Equal(got), "stacked %v, want %v", got, want)
	require.Equal(t, 0, st.Len())
	require.Nil(t, st.Take(), "empty")

	// The next group gets storage of its own: the first is never written
	// again.
	_, err = st.AppendEncoded(encode(t, sample(7)))
	require.NoError(t, err)
	require.True(t, want.Equal(got))
	next := st.Take()
	require.True(t, sample(7).Equal(next))
}

// A stack with an allocator fills the block it is handed, every row of it
// overwritten, and TakeBlock returns that block; storage of the wrong size
// is not used.
func TestStackFillsRecycledBlocks(t *testing.T) {
	st := tensor.NewStack(3)
	var handed [][]byte
	var offer []byte
	st.SetAlloc(func(size int) []byte {
		b := offer
		offer = nil
		if b != nil {
			handed = append(handed, b)
		}
		return b
	})
	fill := func(first, n int) (tensor.Slots, []byte) {
		for i := first; i < first+n; i++ {
			out, err := st.AppendEncoded(encode(t, sample(i)))
			require.NoError(t, err)
			require.Nil(t, out)
		}
		return st.TakeBlock()
	}
	g1, b1 := fill(0, 3) // no storage offered: allocated
	require.Len(t, handed, 0)
	requireSlotsEqual(t, concat(t, 0, 3), g1)

	for i := range b1 {
		b1[i] = 0xee // what a consumed group's storage may hold
	}
	offer = b1
	g2, b2 := fill(10, 2) // a shorter group in the same block
	require.Len(t, handed, 1)
	require.Same(t, &b1[0], &b2[0], "the recycled block was used")
	require.Same(t, &b1[0], &g2[0].Bytes()[0], "the group is a view of it")
	requireSlotsEqual(t, concat(t, 10, 2), g2)

	small := make([]byte, len(b1)-8) // the wrong size: not used
	offer = small
	g3, b3 := fill(20, 1)
	require.Len(t, handed, 2, "offered")
	require.Len(t, b3, len(b1))
	require.NotSame(t, &small[0], &b3[0])
	requireSlotsEqual(t, concat(t, 20, 1), g3)

	g, b := st.TakeBlock()
	require.Nil(t, g, "nothing stacked")
	require.Nil(t, b)
}

// concat is samples [first, first+n) batched.
func concat(t *testing.T, first, n int) tensor.Slots {
	t.Helper()
	var recs []tensor.Slots
	for i := first; i < first+n; i++ {
		recs = append(recs, sample(i))
	}
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	return want
}

func requireSlotsEqual(t *testing.T, want, got tensor.Slots) {
	t.Helper()
	require.Len(t, got, len(want))
	for k := range want {
		require.Equal(t, want[k].Shape(), got[k].Shape(), "slot %d", k)
		require.Equal(t, want[k].Bytes(), got[k].Bytes(), "slot %d", k)
	}
}

func TestStackLeavesOtherRecordsToDecode(t *testing.T) {
	lod, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{3, 1}, []int64{1, 2, 3}), tensor.LoD{{0, 3}})
	require.NoError(t, err)
	others := map[string]tensor.Slots{
		"LoD":        {lod},
		"two rows":   {{Tensor: tensor.MustFromSlice(tensor.Shape{2, 1}, []int64{1, 2})}},
		"rank 0":     {{Tensor: tensor.MustFromSlice(tensor.Shape{}, []int64{1})}},
		"other dims": {sample(0)[0], {Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []int64{1, 2})}},
		"other type": {sample(0)[0], {Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int32{1})}},
		"one slot":   {sample(0)[0]},
		"no slots":   {},
	}
	for name, rec := range others {
		t.Run(name, func(t *testing.T) {
			st := tensor.NewStack(4)
			_, err := st.AppendEncoded(encode(t, sample(1)))
			require.NoError(t, err)
			out, err := st.AppendEncoded(encode(t, rec))
			require.NoError(t, err)
			require.True(t, rec.Equal(out), "decoded as Decode does")
			require.Equal(t, 1, st.Len(), "the stack is unchanged")
		})
	}
	// A record that does not stack on an empty stack is decoded too, and
	// the next one that does starts a template.
	st := tensor.NewStack(2)
	nested, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{3, 1}, []int64{1, 2, 3}), tensor.LoD{{0, 1}, {0, 3}})
	require.NoError(t, err)
	out, err := st.AppendEncoded(encode(t, tensor.Slots{nested}))
	require.NoError(t, err)
	require.NotNil(t, out, "two levels of LoD")
	out, err = st.AppendEncoded(encode(t, others["two rows"][:1]))
	require.NoError(t, err)
	require.NotNil(t, out)
	out, err = st.AppendEncoded(encode(t, sample(3)))
	require.NoError(t, err)
	require.Nil(t, out)
	require.True(t, sample(3).Equal(st.Take()))
}

func TestStackRejectsWhatDecodeRejects(t *testing.T) {
	st := tensor.NewStack(4)
	_, err := st.AppendEncoded(encode(t, sample(0)))
	require.NoError(t, err)
	bad := encode(t, sample(1))
	bad = bad[:len(bad)-1]
	_, err = st.AppendEncoded(bad)
	var de *tensor.DecodeError
	require.ErrorAs(t, err, &de)
	require.ErrorIs(t, err, tensor.ErrMalformed)
	require.Equal(t, 1, st.Len())
	st.Drop()
	require.Equal(t, 0, st.Len())
	_, err = st.Row(0)
	require.ErrorIs(t, err, tensor.ErrShape)
}

// FuzzStack feeds arbitrary records to a stack after a good one: each is
// stacked, decoded or rejected exactly as Decode would have it, never a
// panic, and what is stacked equals what Decode makes.
func FuzzStack(f *testing.F) {
	good := encode(f, sample(1))
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append([]byte(nil), good[:9]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := tensor.NewStack(3)
		if _, err := st.AppendEncoded(encode(t, sample(0))); err != nil {
			t.Fatal(err)
		}
		want, stacked := appendAsDecode(t, st, b)
		if !stacked {
			return
		}
		row, err := st.Row(1)
		if err != nil || !want.Equal(row) {
			t.Fatalf("stacked %v (%v), Decode makes %v", row, err, want)
		}
		// Stacked into a recycled block that holds other bytes, the same.
		re := tensor.NewStack(3)
		re.SetAlloc(func(size int) []byte { return bytes.Repeat([]byte{0xa5}, size) })
		for _, rec := range [][]byte{encode(t, sample(0)), b} {
			if out, err := re.AppendEncoded(rec); err != nil || out != nil {
				t.Fatalf("stacked once, not into a recycled block: %v, %v", out, err)
			}
		}
		group := re.Take()
		again, err := tensor.Concat([]tensor.Slots{sample(0), want})
		if err != nil || !again.Equal(group) {
			t.Fatalf("in a recycled block %v, want %v (%v)", group, again, err)
		}
	})
}

// appendAsDecode appends b to st, a stack of one record, and checks that
// it is stacked, decoded or rejected as Decode has it; want is Decode's
// record, stacked whether it went onto the stack.
func appendAsDecode(t *testing.T, st *tensor.Stack, b []byte) (want tensor.Slots, stacked bool) {
	t.Helper()
	want, derr := tensor.Decode(b)
	out, err := st.AppendEncoded(b)
	switch {
	case derr != nil:
		if !errors.Is(err, tensor.ErrMalformed) {
			t.Fatalf("Decode fails with %v, the stack with %v", derr, err)
		}
		return nil, false
	case err != nil:
		t.Fatalf("Decode accepts it, the stack fails: %v", err)
	case out != nil:
		if !want.Equal(out) || st.Len() != 1 {
			t.Fatalf("not stacked, but decoded %v (want %v), stack of %d", out, want, st.Len())
		}
		return want, false
	}
	return want, true
}

// FuzzStackSequences is FuzzStack after a record of a sequence slot.
func FuzzStackSequences(f *testing.F) {
	f.Add(encode(f, sequence(f, 4)))
	f.Add(encode(f, sequence(f, 0)))
	f.Add(encode(f, sample(1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		st := tensor.NewStack(3)
		if out, err := st.AppendEncoded(encode(t, sequence(t, 3))); err != nil || out != nil {
			t.Fatal(out, err)
		}
		want, stacked := appendAsDecode(t, st, b)
		if !stacked {
			return
		}
		group := st.Take()
		again, err := tensor.Concat([]tensor.Slots{sequence(t, 3), want})
		if err != nil || !again.Equal(group) {
			t.Fatalf("stacked %v, want %v (%v)", group, again, err)
		}
	})
}

// A block of large records holds as many as fit the stack's byte bound, not
// its capacity: its storage is the rows of that many (sample is 12 bytes).
func TestStackBlocksStayWithinMaxBytes(t *testing.T) {
	for _, c := range []struct{ maxBytes, rows int }{{0, 8}, {50, 4}, {48, 4}, {47, 3}, {5, 1}, {1000, 8}} {
		st := tensor.NewStack(8)
		st.SetMaxBytes(c.maxBytes)
		var rows int
		for i := 0; !st.Full(); i++ {
			out, err := st.AppendEncoded(encode(t, sample(i)))
			require.NoError(t, err)
			require.Nil(t, out, "stacked")
			rows++
		}
		require.Equal(t, c.rows, rows, "max bytes %d", c.maxBytes)
		out, err := st.AppendEncoded(encode(t, sample(99)))
		require.NoError(t, err)
		require.NotNil(t, out, "a full stack leaves the record to Decode")
		g, block := st.TakeBlock()
		requireSlotsEqual(t, concat(t, 0, rows), g)
		require.Len(t, block, (rows*4+7)&^7+rows*8, "the block is the rows' storage, each slot 8-byte aligned")
	}
}

// Append stacks decoded records as AppendEncoded stacks encoded ones, and
// refuses, leaving the stack as it was, a record of another layout, one
// with LoD, and any record once full.
func TestStackAppendsDecodedRecords(t *testing.T) {
	st := tensor.NewStack(3)
	var recs []tensor.Slots
	for i := range 3 {
		s := sample(i)
		require.True(t, st.Append(s))
		recs = append(recs, sample(i))
		s[0].Bytes()[0] = 0xff // copied: the record's storage may be reused
	}
	require.False(t, st.Append(sample(5)), "full")
	got := st.Take()
	want, err := tensor.Concat(recs)
	require.NoError(t, err)
	require.True(t, want.Equal(got))

	require.True(t, st.Append(sample(1)))
	other := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 4}, []uint8{1, 2, 3, 4})}, sample(1)[1]}
	require.False(t, st.Append(other), "another shape")
	lod := sample(2)
	lod[0].LoD = [][]int{{0, 1}}
	require.False(t, st.Append(lod), "LoD")
	require.Equal(t, 1, st.Len())
	require.True(t, sample(1).Equal(st.Take()))
	require.True(t, st.Append(other), "an empty stack takes a new layout")
}

// sequence is a record of one sequence slot (i bytes, a PNG's) and a
// [1] int64 label.
func sequence(t testing.TB, i int) tensor.Slots {
	t.Helper()
	b := make([]uint8, i)
	for k := range b {
		b[k] = uint8(i + k)
	}
	seq, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{i}, b), tensor.LoD{{0, i}})
	require.NoError(t, err)
	return tensor.Slots{seq, {Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})}}
}

// Records of a sequence slot (of any length, 0 too) stack as Concat joins
// them, encoded or decoded, into a recycled block or not; a row is its
// record again; Drop forgets the last; a record whose slot is dense where
// the template's is a sequence, or of other trailing dimensions, is left to
// Decode.
func TestStackStacksSequences(t *testing.T) {
	for _, recycled := range []bool{false, true} {
		st := tensor.NewStack(8)
		if recycled {
			st.SetAlloc(func(size int) []byte { return bytes.Repeat([]byte{0xa5}, size) })
		}
		var recs []tensor.Slots
		for i, n := range []int{5, 0, 300, 1, 7} {
			var out tensor.Slots
			var err error
			if i%2 == 0 {
				out, err = st.AppendEncoded(encode(t, sequence(t, n)))
			} else {
				require.True(t, st.Append(sequence(t, n)))
			}
			require.NoError(t, err)
			require.Nil(t, out, "stacked")
			recs = append(recs, sequence(t, n))
		}
		require.True(t, st.Append(sequence(t, 9)))
		st.Drop()
		for i, rec := range recs {
			row, err := st.Row(i)
			require.NoError(t, err)
			require.True(t, rec.Equal(row), "row %d: %v", i, row)
		}
		dense := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []uint8{1})}, sequence(t, 1)[1]}
		require.False(t, st.Append(dense), "dense where the template has a sequence")
		wide, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{1, 2}, []uint8{1, 2}), tensor.LoD{{0, 1}})
		require.NoError(t, err)
		require.False(t, st.Append(tensor.Slots{wide, sequence(t, 1)[1]}), "other trailing dimensions")

		want, err := tensor.Concat(recs)
		require.NoError(t, err)
		got := st.Take()
		require.True(t, want.Equal(got), "stacked %v, want %v", got, want)

		// The next group's sequences are storage of their own.
		require.True(t, st.Append(sequence(t, 4)))
		require.True(t, want.Equal(got), "the first group is never written again")
		require.True(t, sequence(t, 4).Equal(st.Take()))
	}
}

// A stack of sequences is full once their bytes and the dense rows reach
// the byte bound, before its capacity.
func TestStackSequencesStayWithinMaxBytes(t *testing.T) {
	st := tensor.NewStack(100)
	st.SetMaxBytes(100)
	n := 0
	for !st.Full() {
		require.True(t, st.Append(sequence(t, 12)))
		n++
	}
	require.Equal(t, 5, n, "5 records of 12+8 bytes reach 100")
	g := st.Take()
	require.Equal(t, 60, g[0].Rows())
	require.Equal(t, tensor.LoD{{0, 12, 24, 36, 48, 60}}, g[0].LoD)
}

// A group of sequences stays in the block it started in: the bound and
// the largest record so far hold it, with the record that reaches the
// bound (grown by doubling, a block was three times its group's bytes,
// a third of them copied).
func TestStackSequencesFillOneBlock(t *testing.T) {
	st := tensor.NewStack(100)
	st.SetMaxBytes(1000)
	for range 3 {
		require.True(t, st.Append(sequence(t, 300)))
		first, err := st.Row(0)
		require.NoError(t, err)
		for n := 0; !st.Full(); n++ {
			require.True(t, st.Append(sequence(t, 250+n*7%51)))
		}
		again, err := st.Row(0)
		require.NoError(t, err)
		require.Same(t, unsafe.SliceData(first[0].Bytes()), unsafe.SliceData(again[0].Bytes()), "the block was regrown")
		st.Take()
	}
}

// One record far past the bound makes its own group's block grow, and
// no later one larger than twice the bound.
func TestStackSequencesAfterAHugeRecord(t *testing.T) {
	st := tensor.NewStack(100)
	st.SetMaxBytes(1000)
	require.True(t, st.Append(sequence(t, 300)))
	require.True(t, st.Append(sequence(t, 10<<20)))
	require.True(t, st.Full())
	st.Take()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for !st.Full() {
		require.True(t, st.Append(sequence(t, 300)))
	}
	st.Take()
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "a group of 300-byte records")
}
