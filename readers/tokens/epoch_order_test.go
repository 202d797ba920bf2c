package tokens_test

import (
	"encoding/binary"
	"hash/fnv"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/tokens"
)

// numbered is n one-sequence documents whose token i of sequence s is
// s*1000 + i, of 0 to 150 tokens (a few empty).
func numbered(n int) [][][]int64 {
	docs := make([][][]int64, n)
	for s := range docs {
		seq := make([]int64, (s*37)%151)
		for i := range seq {
			seq[i] = int64(s*1000 + i)
		}
		docs[s] = [][]int64{seq}
	}
	return docs
}

// An epoch's document order packs every sequence once, whole and in its
// own order, the sequences of a group of DocumentGroup next to each other;
// positions restart where a sequence starts; another epoch or seed packs
// them otherwise, and the same epoch and seed alike.
func TestEpochOrderPacksEverySequenceOnce(t *testing.T) {
	docs := numbered(1000)
	x, err := tokens.OpenIndexed(writeIndexed(t, oracle.Start(t), "int32", docs))
	require.NoError(t, err)
	defer x.Close()
	const seqLen = 50
	n := tokens.Samples(x, seqLen)
	stream := func(seed, epoch uint64) []int64 {
		o := x.EpochOrder(seed, epoch)
		var out []int64
		toks, pos := make([]int64, seqLen+1), make([]int64, seqLen+1)
		for i := range n {
			require.NoError(t, o.Sample(i, toks, pos))
			if i > 0 {
				require.Equal(t, out[len(out)-1], toks[0], "sample %d starts with the last one's target", i)
				out = out[:len(out)-1]
			}
			for k := range toks {
				s, at := toks[k]/1000, toks[k]%1000
				switch {
				case k == 0:
					require.Zero(t, pos[k])
				case toks[k-1]/1000 != s:
					require.Zero(t, at, "sample %d: a sequence is entered at its start", i)
					require.Zero(t, pos[k], "sample %d: positions restart at a sequence", i)
				default:
					require.Equal(t, toks[k-1]+1, toks[k])
					require.Equal(t, pos[k-1]+1, pos[k])
				}
			}
			out = append(out, toks...)
		}
		return out
	}
	order := func(s []int64) []int64 { // the sequences in the order the stream packs them
		var seqs []int64
		for k, tok := range s {
			if k == 0 || tok/1000 != s[k-1]/1000 {
				seqs = append(seqs, tok/1000)
			}
		}
		return seqs
	}
	first := order(stream(5, 0))
	seen := map[int64]bool{}
	for _, s := range first {
		require.False(t, seen[s], "sequence %d packed twice", s)
		seen[s] = true
	}
	groups := map[int64]int{} // runs of each group: one
	for k, s := range first {
		if k == 0 || s/tokens.DocumentGroup != first[k-1]/tokens.DocumentGroup {
			groups[s/tokens.DocumentGroup]++
		}
	}
	for g, runs := range groups {
		require.Equal(t, 1, runs, "group %d's sequences are packed together", g)
	}
	nonEmpty := 0
	for _, d := range docs {
		if len(d[0]) > 0 {
			nonEmpty++
		}
	}
	require.GreaterOrEqual(t, len(first), nonEmpty-2, "every sequence but those the last sample cuts off")
	require.Equal(t, first, order(stream(5, 0)), "an epoch's order is a function of seed and epoch")
	require.NotEqual(t, first, order(stream(5, 1)), "epochs differ")
	require.NotEqual(t, first, order(stream(6, 0)), "seeds differ")
}

// An epoch's order is part of every saved state: a sample a checkpoint
// names must hold the same tokens after an upgrade. The stream of one
// epoch is pinned by its hash, so a change that moves any token of it
// fails here rather than in a resumed job.
func TestEpochOrderIsPinned(t *testing.T) {
	x, err := tokens.OpenIndexed(writeIndexed(t, oracle.Start(t), "int32", numbered(1000)))
	require.NoError(t, err)
	defer x.Close()
	const seqLen = 50
	o := x.EpochOrder(5, 3)
	h := fnv.New64a()
	toks, pos := make([]int64, seqLen+1), make([]int64, seqLen+1)
	for i := range tokens.Samples(x, seqLen) {
		require.NoError(t, o.Sample(i, toks, pos))
		for k := range toks {
			h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(toks[k])), uint64(pos[k])))
		}
	}
	require.Equal(t, uint64(0x8998d9cbcf10688d), h.Sum64(), "seed 5, epoch 3: the order changed, and with it every saved state's samples")
}

// BenchmarkEpochOrderSample reads samples of 2,049 tokens in a shuffled
// order, as the global order reads them, from a uint16 corpus in the page
// cache.
func BenchmarkEpochOrderSample(b *testing.B) {
	docs := make([][][]int64, 20000)
	for s := range docs {
		seq := make([]int64, 1+(s*7919)%1999)
		for i := range seq {
			seq[i] = int64(i)
		}
		docs[s] = [][]int64{seq}
	}
	prefix := filepath.Join(b.TempDir(), "bench")
	oracle.Start(b).WriteIndexed(b, prefix, "uint16", docs)
	x, err := tokens.OpenIndexed(prefix)
	require.NoError(b, err)
	defer x.Close()
	const seqLen = 2048
	n := tokens.Samples(x, seqLen)
	o := x.EpochOrder(1, 0)
	toks, pos := make([]int64, seqLen+1), make([]int64, seqLen+1)
	b.SetBytes(8 * (seqLen + 1))
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i = (i + 7919) % n
		if err := o.Sample(i, toks, pos); err != nil {
			b.Fatal(err)
		}
	}
}
