package actors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// Shuffle and batch are written three times: readers' decorators (the
// synchronous core), the actor stages (in any order, where the order's
// assembler does not take over the shuffle), and the hand-written
// baselines the actors are measured against. On random files, windows,
// batch sizes and seeds, the three give the same batches: a window of
// records shuffled by PCG(seed, pass), windows never mixed, the last
// window shuffled short, batches cut in turn, the last kept short (and
// dropped with dropLast, which the baselines do not have), and a second
// pass reshuffled (the baselines run one).
func TestShuffleAndBatchMeanTheSameEverywhere(t *testing.T) {
	ctx := testutil.Context(t)
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for i := range 12 {
		n, window, size := rng.IntN(400), rng.IntN(70), 1+rng.IntN(40)
		seed, dropLast := rng.Uint64(), rng.IntN(3) == 0
		path := testutil.WriteRecords(t, filepath.Join(dir, fmt.Sprintf("f%d.rio", i)), 100+rng.IntN(2000), n, func(r int) tensor.Slots { return testutil.Sample(0, r) })
		name := fmt.Sprintf("%d records, window %d, batch %d, drop last %v", n, window, size, dropLast)

		passes := decoratorBatches(t, ctx, path, window, size, seed, dropLast)
		require.Equal(t, passes, stageBatches(t, ctx, path, window, size, seed, dropLast), "%s: the actor stages", name)
		want := passes[0]
		if dropLast {
			continue
		}
		for bname, run := range map[string]func(func(tensor.Slots)) (int, error){
			"channels": func(step func(tensor.Slots)) (int, error) {
				return baseline.Channels(ctx, []string{path}, window, size, seed, step)
			},
			"stacked": func(step func(tensor.Slots)) (int, error) {
				return baseline.Stacked(ctx, []string{path}, baseline.StackedOptions{Window: window, Batch: size, Group: 8, Seed: seed}, step)
			},
		} {
			var got [][]int64
			_, err := run(func(b tensor.Slots) { got = append(got, values(t, b)) })
			require.NoError(t, err)
			require.Equal(t, want, got, "%s: baseline %s", name, bname)
		}
	}
}

// decoratorBatches reads two passes of path through readers.Shuffle and
// readers.Batch.
func decoratorBatches(t *testing.T, ctx context.Context, path string, window, size int, seed uint64, dropLast bool) [][][]int64 {
	t.Helper()
	f, err := readers.Open(path, readers.OpenOptions{})
	require.NoError(t, err)
	r := readers.Batch(readers.Shuffle(f, window, seed), size, dropLast)
	defer r.Close()
	passes := make([][][]int64, 2)
	for pass := range passes {
		if pass > 0 {
			require.NoError(t, r.Reset())
		}
		for {
			b, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			passes[pass] = append(passes[pass], values(t, b))
		}
	}
	return passes
}

// stageBatches reads two passes of path through the actor stages: one
// reader in any order delivers the file's records in file order.
func stageBatches(t *testing.T, ctx context.Context, path string, window, size int, seed uint64, dropLast bool) [][][]int64 {
	t.Helper()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: []string{path}, Threads: 1, AnyOrder: true},
		actors.Shuffle{Window: window, Seed: seed}, actors.Batch{Size: size, DropLast: dropLast}}, actors.Options{System: sharedSys})
	require.NoError(t, err)
	defer closeAndCheck(t, p, sharedSys)
	passes := make([][][]int64, 2)
	for pass := range passes {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		readPass(t, ctx, p, func(it actors.Item) { passes[pass] = append(passes[pass], values(t, it.Slots)) })
	}
	return passes
}

// values is the first slot of a batch (Sample's record number).
func values(t *testing.T, b tensor.Slots) []int64 {
	t.Helper()
	v, err := tensor.View[int64](b[0].Tensor)
	require.NoError(t, err)
	return append([]int64(nil), v...)
}
