package actors

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// stackedPart stacks n records into one block, registers it with pool,
// and returns it as a part with its block.
func stackedPart(t *testing.T, pool *blockPool, n int) (*messages.Part, []byte) {
	t.Helper()
	st := tensor.NewStack(n)
	st.SetAlloc(pool.alloc)
	for i := range n {
		rec, err := tensor.Encode(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []int64{int64(i), -int64(i)})}})
		require.NoError(t, err)
		out, err := st.AppendEncoded(rec)
		require.NoError(t, err)
		require.Nil(t, out)
	}
	group, block := st.TakeBlock()
	pool.register(block, n)
	b, err := messages.FromParts([]tensor.Slots{group}, make([]uint64, n))
	require.NoError(t, err)
	return b.Parts[0], block
}

func refs(p *messages.Part, rows ...int) []messages.Ref {
	var out []messages.Ref
	for _, r := range rows {
		out = append(out, messages.Ref{Part: p, Row: r})
	}
	return out
}

func TestBlockPoolRecyclesABlockOnceEveryRowIsJoined(t *testing.T) {
	pool := newBlockPool(4)
	var counts partCounts
	a, blockA := stackedPart(t, pool, 3)
	b, _ := stackedPart(t, pool, 2)
	size := len(blockA)

	pool.joined(append(refs(a, 2, 0), refs(b, 1)...), &counts)
	require.Empty(t, pool.free, "a has a row left, b has one")
	pool.joined(refs(a, 1), &counts)
	require.Len(t, pool.free, 1, "every row of a was joined")

	// The next group is stacked into a's block, which is counted afresh.
	c, blockC := stackedPart(t, pool, 3)
	require.Same(t, &blockA[0], &blockC[0], "the recycled block holds the next group")
	require.Equal(t, 1, pool.reusedCount())
	require.Nil(t, pool.alloc(size), "handed out once")
	pool.joined(refs(c, 0, 1), &counts)
	require.Empty(t, pool.free)
	pool.joined(refs(c, 2), &counts)
	got := pool.alloc(size)
	require.NotNil(t, got)
	require.Same(t, &blockA[0], &got[0])
}

func TestBlockPoolIgnoresStorageItDidNotRegister(t *testing.T) {
	pool := newBlockPool(4)
	var counts partCounts
	other, err := messages.FromParts([]tensor.Slots{{{Tensor: tensor.MustFromSlice(tensor.Shape{2, 2}, []int64{1, 2, 3, 4})}}}, []uint64{0, 1})
	require.NoError(t, err)
	empty := &messages.Part{}
	pool.joined(append(refs(other.Parts[0], 0, 1), refs(empty, 0)...), &counts)
	require.Nil(t, pool.alloc(len(other.Parts[0].Slots[0].Data)))
	require.Empty(t, pool.free)
}

func TestBlockPoolKeepsAtMostLimitBlocks(t *testing.T) {
	pool := newBlockPool(2)
	var counts partCounts
	var all []messages.Ref
	var size int
	for range 3 {
		p, block := stackedPart(t, pool, 2)
		all, size = append(all, refs(p, 0, 1)...), len(block)
	}
	pool.joined(all, &counts)
	require.Len(t, pool.free, 2, "the third block is left to the collector")
	require.NotNil(t, pool.alloc(size))
	require.NotNil(t, pool.alloc(size))
	require.Nil(t, pool.alloc(size))
}

// A block whose rows are never all joined (a Reset, a dropped last batch)
// is not kept alive by the pool: once collected, a sweep drops its entry.
func TestBlockPoolForgetsCollectedBlocks(t *testing.T) {
	pool := newBlockPool(4)
	for range 10 {
		stackedPart(t, pool, 2) // registered, then dropped: never joined
	}
	require.Len(t, pool.live, 10)
	runtime.GC()
	runtime.GC()
	pool.sweep = 0 // the next registration sweeps
	p, _ := stackedPart(t, pool, 2)
	require.Len(t, pool.live, 1, "only the live block is left")
	runtime.KeepAlive(p)
}

// The counts merge refs to one part however many parts a join names.
func TestPartCountsPastTheLinearSearch(t *testing.T) {
	var c partCounts
	parts := make([]*messages.Part, 40)
	for i := range parts {
		parts[i] = &messages.Part{}
	}
	for round := range 3 {
		c.reset()
		for i := range 3 * len(parts) {
			c.add(parts[(i*7)%len(parts)])
		}
		require.Len(t, c.list, len(parts), "round %d", round)
		for _, pc := range c.list {
			require.Equal(t, 3, pc.rows)
		}
	}
}
