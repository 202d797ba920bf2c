package baseline_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type pipeline func(ctx context.Context, paths []string, window, batch int, seed uint64, step func(tensor.Slots)) (int, error)

// pipelines are the baselines; the stacked one with small blocks, so that
// the tests' files make many, and their storage is recycled many times.
var pipelines = map[string]pipeline{
	"channels": baseline.Channels,
	"stacked":  stacked(false),
	"recycled": stacked(true),
}

func stacked(recycle bool) pipeline {
	return func(ctx context.Context, paths []string, window, batch int, seed uint64, step func(tensor.Slots)) (int, error) {
		return baseline.Stacked(ctx, paths, baseline.StackedOptions{Window: window, Batch: batch, Group: 8, Seed: seed, Recycle: recycle}, step)
	}
}

func forEach(t *testing.T, test func(t *testing.T, run pipeline)) {
	for name, run := range pipelines {
		t.Run(name, func(t *testing.T) { test(t, run) })
	}
}

// write makes a file of n records whose value slot is first+r.
func write(t *testing.T, path string, first, n int) {
	t.Helper()
	_, err := readers.WriteRecordFile(path, recordio.WriterOptions{MaxChunkBytes: 500}, readers.Samples(n, func(r int) (tensor.Slots, error) {
		return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(first + r)})}}, nil
	}))
	require.NoError(t, err)
}

func TestEverySampleOnceInBatches(t *testing.T) { forEach(t, everySampleOnceInBatches) }

func everySampleOnceInBatches(t *testing.T, run pipeline) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rio"), filepath.Join(dir, "b.rio")
	write(t, a, 0, 70)
	write(t, b, 70, 45)
	seen := map[int64]int{}
	var sizes []int
	var order []int64
	n, err := run(t.Context(), []string{a, b}, 32, 16, 7, func(s tensor.Slots) {
		v, err := tensor.View[int64](s[0].Tensor)
		require.NoError(t, err)
		sizes = append(sizes, len(v))
		for _, x := range v {
			seen[x]++
		}
		order = append(order, v...)
	})
	require.NoError(t, err)
	require.Equal(t, 115, n)
	require.Len(t, seen, 115)
	for x, c := range seen {
		require.Equal(t, 1, c, "sample %d", x)
	}
	require.Equal(t, 8, len(sizes), "115 samples in batches of 16: 7 full and one of 3")
	require.Equal(t, 3, sizes[len(sizes)-1])
	require.False(t, slices.IsSorted(order), "shuffled")
}

func TestReportsAReadError(t *testing.T) {
	forEach(t, func(t *testing.T, run pipeline) {
		_, err := run(t.Context(), []string{filepath.Join(t.TempDir(), "missing.rio")}, 8, 4, 1, func(tensor.Slots) {})
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// A cancelled run stops its goroutines (goleak checks) and says why.
func TestStopsOnCancel(t *testing.T) { forEach(t, stopsOnCancel) }

func stopsOnCancel(t *testing.T, run pipeline) {
	path := filepath.Join(t.TempDir(), "a.rio")
	write(t, path, 0, 500)
	ctx, cancel := context.WithCancel(t.Context())
	steps := 0
	_, err := run(ctx, []string{path}, 16, 4, 1, func(tensor.Slots) {
		if steps++; steps == 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
}

// parallel runs baseline.Parallel with lanes lanes and devices devices,
// collecting each device's samples in the order it stepped them.
func parallel(ctx context.Context, paths []string, lanes, devices int, recycle bool) (int, [][]int64, error) {
	got := make([][]int64, devices)
	o := baseline.ParallelOptions{StackedOptions: baseline.StackedOptions{Window: 32, Batch: 16, Group: 8, Seed: 7, Recycle: recycle},
		Lanes: lanes, Devices: devices}
	n, err := baseline.Parallel(ctx, paths, o, func(d int, s tensor.Slots) {
		v, err := tensor.View[int64](s[0].Tensor)
		if err != nil {
			panic(err)
		}
		got[d] = append(got[d], v...) // each device appends to its own slice only
	})
	return n, got, err
}

func TestParallelStepsEverySampleOnceOnEveryLaneCount(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rio"), filepath.Join(dir, "b.rio")
	write(t, a, 0, 300)
	write(t, b, 300, 145)
	for _, lanes := range []int{1, 2, 3, 8} {
		for _, devices := range []int{1, 3} {
			n, got, err := parallel(t.Context(), []string{a, b}, lanes, devices, devices == 3)
			require.NoError(t, err)
			require.Equal(t, 445, n)
			var all []int64
			for _, g := range got {
				all = append(all, g...)
			}
			require.False(t, slices.IsSorted(all), "shuffled")
			slices.Sort(all)
			for i, x := range all {
				require.Equal(t, int64(i), x, "lanes %d devices %d: every sample once", lanes, devices)
			}
		}
	}
}

// The merged stream is a function of the files, the seed and the lanes.
func TestParallelOrderIsTheSameFromRunToRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.rio")
	write(t, path, 0, 400)
	_, first, err := parallel(t.Context(), []string{path}, 3, 1, false)
	require.NoError(t, err)
	for range 3 {
		_, again, err := parallel(t.Context(), []string{path}, 3, 1, true)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
}

func TestParallelReportsErrorsAndStopsOnCancel(t *testing.T) {
	_, _, err := parallel(t.Context(), []string{filepath.Join(t.TempDir(), "missing.rio")}, 2, 1, false)
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "a.rio")
	write(t, path, 0, 2000)
	ctx, cancel := context.WithCancel(t.Context())
	steps := 0
	o := baseline.ParallelOptions{StackedOptions: baseline.StackedOptions{Window: 16, Batch: 4, Group: 8, Seed: 1}, Lanes: 4, Devices: 1}
	_, err = baseline.Parallel(ctx, []string{path}, o, func(int, tensor.Slots) {
		if steps++; steps == 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
}

// A lane that fails stops the others: the run returns the error, and
// goleak finds no goroutine left.
func TestParallelLaneErrorStopsTheRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.rio")
	write(t, path, 0, 2000)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff // a payload byte: its chunk's checksum fails
	require.NoError(t, os.WriteFile(path, data, 0o644))
	_, _, err = parallel(t.Context(), []string{path}, 4, 2, false)
	require.ErrorIs(t, err, format.ErrCorrupt)
}
