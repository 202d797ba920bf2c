package order_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/order"
)

// blendOrder is the order of a blend over files of sizes records.
func blendOrder(t testing.TB, sizes []uint64, b order.Blend, seed uint64) *order.Order {
	t.Helper()
	var splits []order.Split
	for f, n := range sizes {
		splits = append(splits, order.Split{File: f, Count: n})
	}
	o, err := order.New(splits, order.Config{Seed: seed, Shuffle: true, Files: len(sizes), Blend: &b})
	require.NoError(t, err)
	return o
}

// TestBlendFollowsItsWeights walks blends of 1 to 12 files with random
// weights position by position: every file's q counts its positions
// before, and after any number of positions each file's count is within
// two samples of its weight's share (the rule's bound, docs/tokens.md).
func TestBlendFollowsItsWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var worst float64
	for trial := range 1000 {
		files := 1 + trial%16
		sizes, weights := make([]uint64, files), make([]float64, files)
		var sum float64
		for f := range files {
			sizes[f] = 1 + rng.Uint64N(500)
			weights[f] = rng.Float64()
			if rng.IntN(5) == 0 {
				weights[f] *= 0.01
			}
			sum += weights[f]
		}
		o := blendOrder(t, sizes, order.Blend{Weights: weights, Samples: 3000}, 7)
		ep := o.Epoch(0)
		counts := make([]uint64, files)
		for p := range uint64(3000) {
			f, q := ep.At(p)
			if counts[f] != q {
				t.Fatalf("trial %d position %d: file %d's q is %d, and %d positions went to it before", trial, p, f, q, counts[f])
			}
			counts[f]++
			for g := range files {
				dev := math.Abs(float64(counts[g]) - weights[g]/sum*float64(p+1))
				if dev >= 2 {
					t.Fatalf("trial %d file %d after %d positions: %d, %.2f from its share", trial, g, p+1, counts[g], dev)
				}
				worst = max(worst, dev)
			}
		}
	}
	t.Logf("the largest deviation from a weight's share: %.3f samples", worst)
}

// TestBlendedFilesRunEpochsOfTheirOwn: a file given more positions than
// it holds starts its next epoch, and each of its epochs reads every
// record once, in an order of that epoch's own.
func TestBlendedFilesRunEpochsOfTheirOwn(t *testing.T) {
	sizes := []uint64{10, 1000, 5000}
	o := blendOrder(t, sizes, order.Blend{Weights: []float64{1, 1, 1}, Samples: 600}, 11)
	seen := map[[3]uint64]int{}
	firsts := map[uint64][]uint64{}
	for e := range uint64(3) {
		ep := o.Epoch(e)
		for g := range o.Len() {
			f, rec, fe := ep.Source(g)
			require.Less(t, rec, sizes[f])
			seen[[3]uint64{uint64(f), fe, rec}]++
			if f == 0 && len(firsts[fe]) < 10 {
				firsts[fe] = append(firsts[fe], rec)
			}
		}
	}
	// File 0 was given 600 positions: 60 whole epochs of its 10 records.
	for fe := range uint64(60) {
		for rec := range uint64(10) {
			require.Equal(t, 1, seen[[3]uint64{0, fe, rec}], "epoch %d record %d", fe, rec)
		}
	}
	require.NotEqual(t, firsts[0], firsts[1], "file 0's epochs 0 and 1 in the same order")
	for k, n := range seen {
		require.Equal(t, 1, n, "%v", k)
	}
}

// TestBlendPhasesGoOnFromWhereTheLastStopped: after a phase change each
// file's count goes on from its count at the change, and the new weights
// hold from there; a weight of 0 gives a file nothing.
func TestBlendPhasesGoOnFromWhereTheLastStopped(t *testing.T) {
	sizes := []uint64{100, 100, 100}
	b := order.Blend{Weights: []float64{0.5, 0.5, 0}, Samples: 300,
		Phases: []order.Phase{{From: 450, Weights: []float64{0, 0.25, 0.75}}, {From: 1000, Weights: []float64{1, 1, 1}}}}
	o := blendOrder(t, sizes, b, 1)
	counts := make([]uint64, 3)
	at450 := []uint64{}
	for p := range uint64(1500) {
		if p == 450 {
			at450 = append(at450, counts...)
		}
		f, q := o.Epoch(p / 300).At(p % 300)
		require.Equal(t, counts[f], q, "position %d", p)
		counts[f]++
		switch {
		case p < 450:
			require.NotEqual(t, 2, f, "position %d", p)
		case p < 1000:
			require.NotEqual(t, 0, f, "position %d", p)
		}
	}
	require.Equal(t, []uint64{225, 225, 0}, at450)
	require.InDelta(t, 225+550.0/4, float64(counts[1])-float64(500)/3, 1.5)
}

// TestBlendsAreTheirWeightsAndSeed: the same blend is the same order in
// every process; another seed, other weights or another phase make
// another blend, and its sum says so.
func TestBlendsAreTheirWeightsAndSeed(t *testing.T) {
	sizes := []uint64{50, 70}
	a := blendOrder(t, sizes, order.Blend{Weights: []float64{0.7, 0.3}}, 5)
	b := blendOrder(t, sizes, order.Blend{Weights: []float64{7, 3}}, 5)
	c := blendOrder(t, sizes, order.Blend{Weights: []float64{0.6, 0.4}}, 5)
	d := blendOrder(t, sizes, order.Blend{Weights: []float64{0.7, 0.3}, Phases: []order.Phase{{From: 60, Weights: []float64{1, 0}}}}, 5)
	require.Equal(t, uint64(120), a.Len(), "an epoch of a blend is its files' records by default")
	require.Equal(t, a.Blended(), b.Blended(), "weights are proportions")
	require.NotEqual(t, a.Blended(), c.Blended())
	require.NotEqual(t, a.Blended(), d.Blended())
	e := blendOrder(t, sizes, order.Blend{Weights: []float64{0.7, 0.3}, Phases: []order.Phase{{From: 60, Weights: []float64{0, 1}}}}, 5)
	require.NotEqual(t, d.Blended(), e.Blended(), "phases of one file each, another file")
	for g := range a.Len() {
		fa, ra, ea := a.Epoch(2).Source(g)
		fb, rb, eb := b.Epoch(2).Source(g)
		require.Equal(t, [3]uint64{uint64(fa), ra, ea}, [3]uint64{uint64(fb), rb, eb})
	}
}

// TestBlendRefusesWhatItCannotBlend names each problem.
func TestBlendRefusesWhatItCannotBlend(t *testing.T) {
	splits := []order.Split{{File: 0, Count: 5}, {File: 1, Count: 5}}
	for _, c := range []struct {
		b    order.Blend
		want string
	}{
		{order.Blend{Weights: []float64{1}}, "1 weights for 2 files"},
		{order.Blend{Weights: []float64{0, 0}}, "no file has a positive weight"},
		{order.Blend{Weights: []float64{1, math.NaN()}}, "file 1's weight NaN"},
		{order.Blend{Weights: []float64{1, -1}}, "file 1's weight -1"},
		{order.Blend{Weights: []float64{1, 1}, Phases: []order.Phase{{From: 0, Weights: []float64{1, 1}}}}, "phase 1 starts at position 0"},
		{order.Blend{Weights: []float64{1, 1}, Phases: []order.Phase{{From: 9, Weights: []float64{1}}}}, "phase 1: 1 weights"},
	} {
		_, err := order.New(splits, order.Config{Global: true, Files: 2, Blend: &c.b})
		require.ErrorIs(t, err, order.ErrBadOrder)
		require.ErrorContains(t, err, c.want)
	}
	_, err := order.New([]order.Split{{File: 0, Count: 5}}, order.Config{Global: true, Files: 2, Blend: &order.Blend{Weights: []float64{1, 1}}})
	require.ErrorContains(t, err, "file 1 holds no record")
}

// BenchmarkBlendAt is the cost of a blended position over ten files.
func BenchmarkBlendAt(b *testing.B) {
	sizes := make([]uint64, 10)
	weights := make([]float64, 10)
	for f := range sizes {
		sizes[f], weights[f] = 1e6, float64(f+1)
	}
	o := blendOrder(b, sizes, order.Blend{Weights: weights}, 1)
	ep := o.Epoch(3)
	for i := 0; b.Loop(); i++ {
		ep.Source(uint64(i) % o.Len())
	}
}
