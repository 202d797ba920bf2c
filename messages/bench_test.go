package messages_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// shuffledGroup is what a shuffle stage hands the batch stage: 128
// instances drawn at random from a window of 8 stacked groups of 128
// Fashion-MNIST-sized records, as refs and as the item Gather makes of them.
func shuffledGroup(b *testing.B) ([]messages.Ref, *messages.Batch) {
	const groups, group = 8, 128
	var window []messages.Ref
	for g := range groups {
		img := make([]uint8, group*784)
		lab := make([]int64, group)
		block := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{group, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{group, 1}, lab)}}
		ids := make([]uint64, group)
		for i := range ids {
			ids[i] = messages.SampleID(0, g*group+i)
		}
		item, err := messages.FromSlots(block, ids)
		require.NoError(b, err)
		window, err = item.Refs(window)
		require.NoError(b, err)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(window), func(i, j int) { window[i], window[j] = window[j], window[i] })
	refs := window[:group]
	ids := make([]uint64, group)
	item, err := messages.Gather(refs, ids)
	require.NoError(b, err)
	return refs, item
}

// BenchmarkShuffleBookkeeping is the per-instance cost of the shuffle's
// hand-off: Gather making an item of 128 shuffled instances, the batch
// stage's Refs taking them back out, and JoinRefs copying 64 of them into
// a batch (recycled storage, so that the copy and the checks are what is
// measured).
func BenchmarkShuffleBookkeeping(b *testing.B) {
	refs, item := shuffledGroup(b)
	ids := make([]uint64, len(refs))
	b.Run("gather", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := messages.Gather(refs, ids); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(refs)), "ns/instance")
	})
	b.Run("join", func(b *testing.B) { // a batch of 64 of them, in recycled storage
		b.ReportAllocs()
		out, err := messages.JoinRefs(refs[:64], nil)
		require.NoError(b, err)
		for b.Loop() {
			if out, err = messages.JoinRefs(refs[:64], out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/instance")
	})
	b.Run("refs", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]messages.Ref, 0, len(refs))
		for b.Loop() {
			var err error
			if dst, err = item.Refs(dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(refs)), "ns/instance")
	})
}
