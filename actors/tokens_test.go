package actors_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/tokens"
	"github.com/actorfeed/actorfeed/tensor"
)

// A Megatron-LM indexed dataset (written by NumPy as Megatron-LM writes
// it) is read as packed samples of seq_len+1 tokens in the global order
// and in a window: each epoch holds every sample once, and each batch row holds the sample
// its id names in its epoch's document order (tokens.EpochOrder, keyed by
// the shuffle's seed), its tokens and positions.
func TestTokenCorpusInEitherOrder(t *testing.T) {
	ctx := testutil.Context(t)
	var docs [][][]int64
	tokenCount := 0
	for d := range 300 {
		seq := make([]int64, 1+(d*37)%90)
		for i := range seq {
			seq[i] = int64((d*131 + i) % 60000) // uint16 tokens
		}
		tokenCount += len(seq)
		docs = append(docs, [][]int64{seq})
	}
	prefix := filepath.Join(t.TempDir(), "web_text_document")
	oracle.Start(t).WriteIndexed(t, prefix, "uint16", docs)

	const seqLen = 32
	samples := (tokenCount - 1) / seqLen
	x, err := tokens.OpenIndexed(prefix)
	require.NoError(t, err)
	defer x.Close()
	for _, shuffle := range []actors.Shuffle{{Global: true, Seed: 3}, {Window: 16, Seed: 3}} {
		stages := []actors.Stage{actors.Files{Paths: []string{"megatron(seq_len=32):" + prefix + ".bin"}}, shuffle, actors.Batch{Size: 8}}
		passes := tokenPasses(t, ctx, stages, x, seqLen)
		for e, pass := range passes {
			ids := slices.Concat(pass...)
			require.Len(t, ids, samples)
			sorted := slices.Sorted(slices.Values(ids))
			require.Equal(t, len(sorted), len(slices.Compact(sorted)), "epoch %d: a sample twice", e)
		}
		require.NotEqual(t, passes[0], passes[1], "epochs are different permutations")
	}
}

// tokenPasses runs two passes of stages over x's samples, checking each
// row against its epoch's document order, and returns each pass's ids.
func tokenPasses(t *testing.T, ctx context.Context, stages []actors.Stage, x *tokens.Indexed, seqLen int) [][][]uint64 {
	p, err := actors.New(stages, actors.Options{System: sharedSys})
	require.NoError(t, err)
	want, wantPos := make([]int64, seqLen+1), make([]int64, seqLen+1)
	passes := passItems(t, ctx, p, 2, func(it actors.Item) []uint64 {
		toks, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		pos, err := tensor.View[int64](it.Slots[1].Tensor)
		require.NoError(t, err)
		order := x.EpochOrder(3, uint64(it.Epoch))
		for row, id := range it.IDs {
			_, s := messages.SplitID(id)
			require.NoError(t, order.Sample(uint64(s), want, wantPos))
			require.Equal(t, want, toks[row*(seqLen+1):(row+1)*(seqLen+1)], "sample %d", s)
			require.Equal(t, wantPos, pos[row*(seqLen+1):(row+1)*(seqLen+1)], "sample %d", s)
		}
		return slices.Clone(it.IDs)
	})
	closeAndCheck(t, p, sharedSys)
	return passes
}

// An order that permutes no record assembles it in blocks of at most a few
// MB: 4,096 samples of a token corpus at seq_len 2048 (32 KB each) would
// be held 134 MB at a time; they are 255 (8 MiB), in the global order and
// the sequential one, and records of a few hundred bytes keep 4,096.
func TestLargeRecordsMakeSmallerBlocks(t *testing.T) {
	docs := [][][]int64{{make([]int64, 600_000)}} // 292 samples at seq_len 2048: two blocks
	prefix := filepath.Join(t.TempDir(), "web")
	oracle.Start(t).WriteIndexed(t, prefix, "uint16", docs)
	ctx := testutil.Context(t)
	for _, c := range []struct{ seqLen, block int }{{2048, (8 << 20) / (2 * 8 * 2049)}, {8, 4096}} {
		entry := fmt.Sprintf("megatron(seq_len=%d):%s.bin", c.seqLen, prefix)
		for _, order := range [][]actors.Stage{{actors.Shuffle{Global: true}}, nil} {
			p, err := actors.New(append([]actors.Stage{actors.Files{Paths: []string{entry}}}, order...), actors.Options{System: sharedSys})
			require.NoError(t, err)
			require.Equal(t, c.block, actors.OrderSpan(p), entry)
			if order != nil { // the order is the permutation whatever the block
				ids := slices.Concat(passItems(t, ctx, p, 1, func(it actors.Item) []uint64 { return slices.Clone(it.IDs) })[0]...)
				require.Equal(t, wantGlobal(t, 0, 0, (600_000-1)/c.seqLen), ids, entry)
			}
			closeAndCheck(t, p, sharedSys)
		}
	}
}
