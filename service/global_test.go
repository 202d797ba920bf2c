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
)

// A pipeline in the global order whose workers are other nodes delivers,
// pass after pass, the batches the same pipeline makes in one process:
// each task's worker reads its positions' records by position from every
// file.
func TestServiceDeliversTheGlobalOrderOfOneProcess(t *testing.T) {
	ctx := testutil.Context(t)
	dir := t.TempDir()
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
	stages := []actors.Stage{actors.Files{Paths: paths, Threads: 3}, actors.Shuffle{Global: true, Seed: 3}, actors.Batch{Size: 16}}
	local, err := actors.New(stages, actors.Options{GroupSize: 8})
	require.NoError(t, err)
	want := passes(t, ctx, local, 2, nil)
	require.NoError(t, local.Close())

	ws := startWorkers(t, 3, dir)
	node := client(t)
	p, err := actors.New(stages, actors.Options{System: node.System(), GroupSize: 8,
		Service: &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second}})
	require.NoError(t, err)
	got := passes(t, ctx, p, 2, nil)
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	require.NotEqual(t, want[0], want[1])
	requireNoPipeline(t, node)
}
