//go:build !race

package service_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// globalFiles writes three IDX files of 3,000, 1 and 4,500 records, each
// record its file and its index, and returns their entries.
func globalFiles(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	for f, n := range []int{3000, 1, 4500} {
		data := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{0, 0, 8, 2}, uint32(n)), 8)
		for r := range n {
			data = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(data, uint32(f)), uint32(r))
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%d-idx2-ubyte", f))
		require.NoError(t, os.WriteFile(path, data, 0o644))
		paths = append(paths, "idx:"+path)
	}
	return paths
}

// sameAsOneProcess checks that stages run with workers that are other
// nodes deliver, over two passes, the batches they make in one process,
// and returns those.
func sameAsOneProcess(t *testing.T, dir string, stages []actors.Stage, opts actors.Options) [][][]uint64 {
	t.Helper()
	ctx := testutil.Context(t)
	opts.GroupSize = 8
	local, err := actors.New(stages, opts)
	require.NoError(t, err)
	want := passes(t, ctx, local, 2, nil)
	require.NoError(t, local.Close())

	ws := startWorkers(t, 3, dir)
	node := client(t)
	opts.System, opts.Service = node.System(), &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second}
	p, err := actors.New(stages, opts)
	require.NoError(t, err)
	got := passes(t, ctx, p, 2, nil)
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	requireNoPipeline(t, node)
	return want
}

// A pipeline in the global order whose workers are other nodes delivers,
// pass after pass, the batches the same pipeline makes in one process:
// each task's worker reads its positions' records by position from every
// file.
func TestServiceDeliversTheGlobalOrderOfOneProcess(t *testing.T) {
	dir := t.TempDir()
	stages := []actors.Stage{actors.Files{Paths: globalFiles(t, dir), Threads: 3}, actors.Shuffle{Global: true, Seed: 3}, actors.Batch{Size: 16}}
	want := sameAsOneProcess(t, dir, stages, actors.Options{})
	require.NotEqual(t, want[0], want[1])
}

// A blend whose workers are other nodes delivers the batches it makes in
// one process: the workers are told its weights and its phases, which the
// client resolves from their global steps, so a curriculum's change falls
// on the same step; the file of one record goes through epochs of its own.
func TestServiceDeliversABlendOfOneProcess(t *testing.T) {
	dir := t.TempDir()
	blend := &order.Blend{Weights: []float64{1, 2, 3}, Phases: []order.Phase{{Weights: []float64{3, 0, 1}}}}
	stages := []actors.Stage{actors.Files{Paths: globalFiles(t, dir), Threads: 3, Blend: blend, BlendSteps: []uint64{100}},
		actors.Shuffle{Global: true, Seed: 3}, actors.Batch{Size: 16}}
	want := sameAsOneProcess(t, dir, stages, actors.Options{Shard: actors.Shard{GlobalBatch: 16}})
	seen := map[int]int{}
	for step, batch := range want[0] {
		for _, id := range batch {
			if file, _ := messages.SplitID(id); step >= 100 {
				seen[file]++
			}
		}
	}
	require.Zero(t, seen[1], "the second phase leaves the file of weight 0 out")
	require.NotZero(t, seen[0])
}
