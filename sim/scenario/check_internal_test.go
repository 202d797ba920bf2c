package scenario

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

func TestSameSetCatchesLossAndDuplication(t *testing.T) {
	id := func(r int) uint64 { return messages.SampleID(0, r) }
	want := []uint64{id(0), id(1), id(2), id(3)}
	require.Empty(t, sameSet(want, []uint64{id(3), id(1), id(0), id(2)}, 0, 0), "order does not matter")
	require.Contains(t, sameSet(want, []uint64{id(0), id(1), id(2)}, 0, 0), "missing [0#3]")
	require.Contains(t, sameSet(want, []uint64{id(0), id(1), id(2), id(3), id(3)}, 0, 0), "0#3 x1")
	require.Contains(t, sameSet(want, []uint64{id(0), id(1), id(2), id(2)}, 0, 1), "duplicated", "a duplicate is never allowed")
	require.Empty(t, sameSet(want, []uint64{id(0), id(1)}, 2, 0), "exactly the short last batch dropped")
	require.NotEmpty(t, sameSet(want, []uint64{id(0), id(1), id(2)}, 2, 0), "drop_last drops exactly, not fewer")
	require.Empty(t, sameSet(want, []uint64{id(0), id(1), id(2)}, 0, 2), "a partial step may be dropped")
	require.NotEmpty(t, sameSet(want, []uint64{id(0)}, 0, 2), "but no more")
}

func TestEqualOrders(t *testing.T) {
	a := map[int][][]uint64{0: {{1, 2}, {3}}}
	require.True(t, equalOrders(a, map[int][][]uint64{0: {{1, 2}, {3}}}))
	require.False(t, equalOrders(a, map[int][][]uint64{0: {{2, 1}, {3}}}))
	require.False(t, equalOrders(a, map[int][][]uint64{0: {{1, 2}, {3}}, 1: {}}))
}

func TestLedgerOrderPerDevice(t *testing.T) {
	var l ledger
	l.add(0, 0, 0, []uint64{1, 2})
	l.add(0, 1, 1, []uint64{3})
	l.add(0, 0, 2, []uint64{4})
	require.Equal(t, map[int][][]uint64{0: {{1, 2, 4}, {3}}}, l.order())
}

// The preemption checker catches a sample delivered twice across segments,
// one never delivered, and unequal shares.
func TestCheckPreemptedCatchesLossDuplicationAndUnequalShares(t *testing.T) {
	sc := Scenario{Shape: Shape{Files: 1, Records: 4, Passes: 1}}
	damaged := []map[int]bool{{}}
	id := func(r int) uint64 { return messages.SampleID(0, r) }
	checkIn := func(all []delivered, elastic map[int]bool) []string {
		var got []string
		checkPreempted(func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) }, sc, all, damaged, elastic)
		return got
	}
	check := func(all []delivered) []string { return checkIn(all, nil) }
	ok := []delivered{{world: 2, rank: 0, ids: []uint64{id(0), id(1)}}, {world: 2, rank: 1, ids: []uint64{id(2), id(3)}}}
	require.Empty(t, check(ok))
	twice := append(slices.Clone(ok), delivered{world: 2, rank: 1, index: 1, ids: []uint64{id(3)}})
	require.NotEmpty(t, check(twice), "a sample twice, and rank 1 a batch more")
	require.NotEmpty(t, check(ok[:1]), "samples never delivered")
	padded := append(slices.Clone(ok), delivered{world: 2, rank: 0, index: 1, padding: 1, ids: []uint64{id(0)}},
		delivered{world: 2, rank: 1, index: 1, padding: 1, ids: []uint64{id(1)}})
	require.Empty(t, check(padded), "padding is not a second delivery")
	// Rank 1 stopped before its batch of padding alone, and the epoch's
	// rest went to another world: nothing of it was left to deliver.
	shortOfPadding := append(slices.Clone(ok), delivered{world: 2, rank: 0, index: 1, padding: 1, ids: []uint64{id(0)}})
	require.NotEmpty(t, check(shortOfPadding), "unequal shares in an epoch not re-dealt")
	require.Empty(t, checkIn(shortOfPadding, map[int]bool{0: true}), "an epoch re-dealt part way")
}
