package order_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/order"
)

// quality measures how far an order is from a uniform permutation of the
// same records (docs/determinism.md, "How well it shuffles"):
//   - corr: the correlation of a record's output position with its position
//     in the data set (files in order); 0 for a uniform permutation, 1 for
//     none;
//   - move: the mean distance a record moves, as a fraction of the epoch;
//     1/3 for a uniform permutation;
//   - splits: the distinct splits (chunks) the records of a batch of 64
//     come from, on average; about 64 for a uniform permutation of many
//     splits.
type quality struct{ corr, move, splits float64 }

func measure(seq []int, splitOf func(int) int) quality {
	n := float64(len(seq))
	var sxy, move float64
	mean := (n - 1) / 2
	for out, in := range seq {
		sxy += (float64(out) - mean) * (float64(in) - mean)
		move += math.Abs(float64(out - in))
	}
	variance := (n*n - 1) / 12
	var splits float64
	batches := 0
	for lo := 0; lo+64 <= len(seq); lo += 64 {
		seen := map[int]bool{}
		for _, in := range seq[lo : lo+64] {
			seen[splitOf(in)] = true
		}
		splits += float64(len(seen))
		batches++
	}
	return quality{corr: sxy / n / variance, move: move / n / n, splits: splits / float64(batches)}
}

// TestShuffleQuality measures the order on a data set shaped like
// actorfeed's Fashion-MNIST files (16 files of 60,000 records in chunks of
// 1,250), with windows of 1,024 and 16,384, against a uniform permutation.
// Run with -v for the figures docs/determinism.md quotes.
func TestShuffleQuality(t *testing.T) {
	const files, perFile, chunk = 16, 60000, 1250
	var splits []order.Split
	base := map[int]int{} // file -> its first record's data set position
	for f := range files {
		base[f] = f * perFile
		for at := 0; at < perFile; at += chunk {
			splits = append(splits, order.Split{File: f, First: uint64(at), Count: uint64(min(chunk, perFile-at))})
		}
	}
	splitOf := func(pos int) int { return pos / chunk }
	n := files * perFile
	uniform := rand.New(rand.NewPCG(1, 2)).Perm(n)
	u := measure(uniform, splitOf)
	t.Logf("uniform permutation: corr %.4f, move %.3f, splits per batch of 64 %.1f", u.corr, u.move, u.splits)
	for _, window := range []int{1024, 16384} {
		o, err := order.New(splits, order.Config{Seed: 7, Shuffle: true, Window: window})
		require.NoError(t, err)
		ep := o.Epoch(0)
		seq := make([]int, 0, n)
		jobs := ep.Jobs(order.Full(o.Len(), 1, 0).Cut(0, order.Drop, 0))
		for job, ok := jobs.Next(); ok; job, ok = jobs.Next() {
			var window []int
			for _, p := range ep.Pieces(job.Start, job.Start+uint64(job.Len)) {
				for r := p.From; r < p.To; r++ {
					window = append(window, base[p.File]+int(r))
				}
			}
			perm := ep.Perm(job.Window)
			for i := job.Lo; i < job.Hi; i++ { // one part: the rank's shard is one range
				seq = append(seq, window[perm[i]])
			}
		}
		q := measure(seq, splitOf)
		t.Logf("window %d: corr %.4f, move %.3f, splits per batch of 64 %.1f", window, q.corr, q.move, q.splits)
		require.Less(t, math.Abs(q.corr), 0.1, "the split permutation decorrelates the epoch")
		require.Greater(t, q.move, 0.25, "records move about as far as in a uniform permutation")
	}
}
