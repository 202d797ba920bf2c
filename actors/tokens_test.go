package actors_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// A Megatron-LM indexed dataset (written by NumPy as Megatron-LM writes
// it) is read as packed samples of seq_len+1 tokens in the global order:
// each epoch holds every sample once, and each batch row holds the
// corpus's tokens at the place its id names, its positions restarting at
// every sequence that starts inside it.
func TestTokenCorpusInTheGlobalOrder(t *testing.T) {
	ctx := testutil.Context(t)
	var docs [][][]int64
	var corpus []int64
	starts := map[int]bool{}
	for d := range 300 {
		seq := make([]int64, 1+(d*37)%90)
		for i := range seq {
			seq[i] = int64((d*131 + i) % 60000) // uint16 tokens
		}
		starts[len(corpus)] = true
		corpus = append(corpus, seq...)
		docs = append(docs, [][]int64{seq})
	}
	idx, bin, err := oracle.Start(t).MegatronWrite("uint16", docs)
	require.NoError(t, err)
	prefix := filepath.Join(t.TempDir(), "web_text_document")
	require.NoError(t, os.WriteFile(prefix+".idx", idx, 0o644))
	require.NoError(t, os.WriteFile(prefix+".bin", bin, 0o644))

	const seqLen = 32
	samples := (len(corpus) - 1) / seqLen
	stages := []actors.Stage{actors.Files{Paths: []string{"megatron(seq_len=32):" + prefix + ".bin"}},
		actors.Shuffle{Global: true, Seed: 3}, actors.Batch{Size: 8}}
	p, err := actors.New(stages, actors.Options{System: sharedSys})
	require.NoError(t, err)
	passes := passItems(t, ctx, p, 2, func(it actors.Item) []uint64 {
		toks, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		pos, err := tensor.View[int64](it.Slots[1].Tensor)
		require.NoError(t, err)
		for row, id := range it.IDs {
			_, s := messages.SplitID(id)
			from := s * seqLen
			require.Equal(t, corpus[from:from+seqLen+1], toks[row*(seqLen+1):(row+1)*(seqLen+1)], "sample %d", s)
			var want []int64
			for k, p := 0, int64(0); k <= seqLen; k, p = k+1, p+1 {
				if k > 0 && starts[from+k] {
					p = 0
				}
				want = append(want, p)
			}
			require.Equal(t, want, pos[row*(seqLen+1):(row+1)*(seqLen+1)], "sample %d", s)
		}
		return slices.Clone(it.IDs)
	})
	closeAndCheck(t, p, sharedSys)
	for e, pass := range passes {
		ids := slices.Concat(pass...)
		require.Len(t, ids, samples)
		sorted := slices.Sorted(slices.Values(ids))
		require.Equal(t, len(sorted), len(slices.Compact(sorted)), "epoch %d: a sample twice", e)
	}
	require.NotEqual(t, passes[0], passes[1], "epochs are different permutations")
}
