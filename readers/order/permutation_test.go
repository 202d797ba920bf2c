package order_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/order"
)

// TestPermutationIsABijection checks every n up to 2,100 and a sample of
// larger ones: each position of [0, n) is the image of exactly one.
func TestPermutationIsABijection(t *testing.T) {
	sizes := []uint64{}
	for n := uint64(1); n <= 2100; n++ {
		sizes = append(sizes, n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		sizes = append(sizes, 1+rng.Uint64N(1<<21))
	}
	sizes = append(sizes, 1<<20, 1<<20+1, 1<<21-1)
	for _, n := range sizes {
		p := order.NewPermutation(n, n*7919)
		seen := make([]bool, n)
		for x := range n {
			y := p.At(x)
			if y >= n || seen[y] {
				t.Fatalf("n=%d: position %d maps to %d, out of range or the image of two positions", n, x, y)
			}
			seen[y] = true
		}
	}
}

// TestPermutationOfHugeDomains spot-checks domains up to 2^64-1: images in
// range, distinct over a sample, and the same for the same key.
func TestPermutationOfHugeDomains(t *testing.T) {
	for _, n := range []uint64{1e9, 1e12, 1<<40 + 3, 1<<63 + 5, math.MaxUint64} {
		p := order.NewPermutation(n, 42)
		seen := map[uint64]bool{}
		for x := range uint64(10000) {
			y := p.At(x * (n / 10001))
			require.Less(t, y, n)
			require.False(t, seen[y])
			seen[y] = true
			require.Equal(t, y, order.NewPermutation(n, 42).At(x*(n/10001)))
		}
	}
}

// TestPermutationIsUniformOnSmallDomains counts how often each of the n!
// permutations of n = 4..6 comes out over many keys, and checks the counts
// against a uniform distribution with a chi-square test at significance
// 0.001.
func TestPermutationIsUniformOnSmallDomains(t *testing.T) {
	for _, n := range []int{4, 5, 6} {
		cells := 1
		for k := 2; k <= n; k++ {
			cells *= k
		}
		trials := 200 * cells
		counts := map[int]int{}
		for key := range uint64(trials) {
			p := order.NewPermutation(uint64(n), key)
			code := 0
			for x := range n {
				code = code*n + int(p.At(uint64(x)))
			}
			counts[code]++
		}
		require.Len(t, counts, cells, "n=%d: some permutations never come out", n)
		want := float64(trials) / float64(cells)
		var chi2 float64
		for _, c := range counts {
			chi2 += (float64(c) - want) * (float64(c) - want) / want
		}
		require.Less(t, chi2, chiSquareCritical(cells-1), "n=%d: chi-square %.1f over %d degrees of freedom", n, chi2, cells-1)
	}
}

// chiSquareCritical is the chi-square value a uniform distribution exceeds
// with probability 0.001, for df degrees of freedom (Wilson and
// Hilferty's approximation, good to a few tenths of a percent at these
// degrees of freedom).
func chiSquareCritical(df int) float64 {
	const z = 3.0902 // the standard normal's 0.999 quantile
	k := float64(df)
	c := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * c * c * c
}

// TestGlobalOrder checks the global order over files of uneven sizes: each
// epoch a permutation of every record, different across epochs and seeds,
// the same for the same seed and epoch, with its pieces the virtual file's.
func TestGlobalOrder(t *testing.T) {
	splits := []order.Split{{File: 0, First: 0, Count: 3000}, {File: 2, First: 0, Count: 1}, {File: 3, First: 0, Count: 5000}}
	o, err := order.New(splits, order.Config{Seed: 5, Global: true, Files: 4})
	require.NoError(t, err)
	require.True(t, o.Global())
	require.Equal(t, uint64(8001), o.Len())
	require.Equal(t, 2, o.Splits(), "its blocks: any reader reads any of them")
	orders := map[uint64][]uint64{}
	for e := range uint64(3) {
		ep := o.Epoch(e)
		seen := map[uint64]bool{}
		var seq []uint64
		ep.Records(order.Range{Lo: 0, Hi: o.Len()}, func(f int, rec uint64) {
			id := uint64(f)<<32 | rec
			require.False(t, seen[id])
			seen[id] = true
			seq = append(seq, id)
			require.True(t, f == 0 && rec < 3000 || f == 2 && rec == 0 || f == 3 && rec < 5000, "file %d record %d", f, rec)
		})
		require.Len(t, seen, 8001)
		orders[e] = seq
		f, rec := ep.At(17)
		require.Equal(t, seq[17], uint64(f)<<32|rec)
		p := ep.PieceAt(4000, 8001)
		require.Equal(t, order.Piece{File: 4, From: 4000, To: order.Block, Pos: 4000}, p)
	}
	require.NotEqual(t, orders[0], orders[1])
	o2, err := order.New(splits, order.Config{Seed: 5, Global: true, Files: 4})
	require.NoError(t, err)
	f, rec := o2.Epoch(1).At(100)
	require.Equal(t, orders[1][100], uint64(f)<<32|rec)
	_, err = order.New(splits, order.Config{Global: true, Window: 10})
	require.ErrorIs(t, err, order.ErrBadOrder)
}

// TestGlobalOrderQuality measures the global order as TestShuffleQuality
// measures the windowed one: no correlation with the data set's order, a
// record moving a third of the epoch on average, batches from as many
// splits as a uniform permutation's, and no correlation between
// consecutive epochs or seeds.
func TestGlobalOrderQuality(t *testing.T) {
	const files, perFile, chunk = 16, 60000, 1250
	var splits []order.Split
	for f := range files {
		splits = append(splits, order.Split{File: f, First: 0, Count: perFile})
	}
	o, err := order.New(splits, order.Config{Seed: 3, Global: true, Files: files})
	require.NoError(t, err)
	seqOf := func(ep *order.Epoch) []int {
		var seq []int
		ep.Records(order.Range{Lo: 0, Hi: o.Len()}, func(f int, rec uint64) { seq = append(seq, f*perFile+int(rec)) })
		return seq
	}
	splitOf := func(in int) int { return in / chunk }
	a, b := seqOf(o.Epoch(0)), seqOf(o.Epoch(1))
	q := measure(a, splitOf)
	t.Logf("global: corr %.4f move %.4f splits/batch %.2f", q.corr, q.move, q.splits)
	require.InDelta(t, 0, q.corr, 0.01)
	require.InDelta(t, 1.0/3, q.move, 0.005)
	// 64 draws from 768 splits: 768 * (1 - (767/768)^64) distinct, uniformly.
	chunks := float64(files * perFile / chunk)
	require.InDelta(t, chunks*(1-math.Pow(1-1/chunks, 64)), q.splits, 0.2)
	// Epoch 1 against epoch 0: where a record goes in one says nothing of
	// where it goes in the other.
	posA, posB := make([]int, len(a)), make([]int, len(b))
	for i := range a {
		posA[a[i]], posB[b[i]] = i, i
	}
	require.InDelta(t, 0, correlation(posA, posB), 0.01)
	o2, err := order.New(splits, order.Config{Seed: 4, Global: true, Files: files})
	require.NoError(t, err)
	c := seqOf(o2.Epoch(0))
	posC := make([]int, len(c))
	for i := range c {
		posC[c[i]] = i
	}
	require.InDelta(t, 0, correlation(posA, posC), 0.01)
}

// correlation is Pearson's correlation of x and y, permutations of [0, n).
func correlation(x, y []int) float64 {
	n := float64(len(x))
	mean, variance := (n-1)/2, (n*n-1)/12
	var sxy float64
	for i := range x {
		sxy += (float64(x[i]) - mean) * (float64(y[i]) - mean)
	}
	return sxy / n / variance
}

// TestPermutationIsUniformPastTheTable checks the Feistel network where the
// table ends: over many keys, where positions 0 and 1 (neighbours, the
// pair a weak network would keep together) go, jointly, in 40 x 40 bins,
// against a uniform permutation's distribution with a chi-square test at
// significance 0.001.
func TestPermutationIsUniformPastTheTable(t *testing.T) {
	const bins, keys = 40, 160000
	for _, n := range []uint64{4097, 5000, 70001} {
		counts := make([]float64, bins*bins)
		for key := range uint64(keys) {
			p := order.NewPermutation(n, key)
			a, b := p.At(0)*bins/n, p.At(1)*bins/n
			counts[a*bins+b]++
		}
		// Two distinct positions: a cell's probability is the pairs
		// (a, b), a != b, with a in bin i and b in bin j.
		ceil := func(a uint64) uint64 { return (a + bins - 1) / bins }
		size := func(i uint64) float64 { return float64(ceil((i+1)*n) - ceil(i*n)) } // the y with y*bins/n = i
		pairs := float64(n) * float64(n-1)
		var chi2 float64
		for i := range uint64(bins) {
			for j := range uint64(bins) {
				cell := size(i) * size(j)
				if i == j {
					cell -= size(i)
				}
				want := keys * cell / pairs
				d := counts[i*bins+j] - want
				chi2 += d * d / want
			}
		}
		require.Less(t, chi2, chiSquareCritical(bins*bins-1), "n=%d: chi-square %.1f", n, chi2)
	}
}
