package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/tensor"
)

// A group that completes a window leaves the later windows of the pass
// unopened: the assembler opens a window as its groups come, however many
// the epoch has. It opened every one of them, which cost minutes and a
// structure a window before a billion-record data set's first batch.
func TestWindowsOpenOnlyTheWindowsGroupsReach(t *testing.T) {
	for _, global := range []bool{false, true} {
		const windows = 1000
		o, err := order.New([]order.Split{{File: 0, Count: windows * order.Block}}, order.Config{Seed: 1, Global: global, Files: 1})
		require.NoError(t, err)
		w := (&Plan{Ord: o, Unit: 64, World: 1, FirstPlan: order.Full(o.Len(), 1, 0)}).Windows(true, 64)
		w.begin(0)
		file := 0
		if global {
			file = o.Virtual()
		}
		var items int
		for at := uint64(0); at < 3*order.Block; at += 64 {
			out, err := w.take(group(t, file, at, 64), true)
			require.NoError(t, err)
			items += len(out)
			require.LessOrEqual(t, len(w.open)+len(w.free), 2, "windows opened at S position %d", at)
		}
		require.Equal(t, 3*order.Block/64, items, "every batch of the three windows handed on")
	}
}

// group is a reader's group of n records of file from record at, which
// is also its S position, of run 1.
func group(t *testing.T, file int, at uint64, n int) *messages.Batch {
	ids := make([]uint64, n)
	rows := make([]int64, n)
	for i := range ids {
		ids[i] = messages.SampleID(file, int(at)+i)
		rows[i] = int64(at) + int64(i)
	}
	b, err := messages.FromSlots(tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{n, 1}, rows)}}, ids)
	require.NoError(t, err)
	b.First, b.Count, b.Position, b.Positions, b.Run = at, uint64(n), at, uint64(n), 1
	return b
}
