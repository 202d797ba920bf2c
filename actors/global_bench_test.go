package actors_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
)

// BenchmarkGlobalOrder measures the global order (Shuffle.Global) against
// the windowed order (a window of 4,096) and the sequential one, on the
// same IDX file in the page cache, in the same run: each iteration runs a
// pass of each, taking turns at going first. It reports each order's
// samples/s and the CPU (user and system, every core) it spent a sample,
// and the global order's throughput as a fraction of the windowed one's
// ("global/window") and of the sequential one's ("global/sequential"):
// docs/performance.md quotes them.
//
//	go test -run '^$' -bench GlobalOrder -count 3 ./actors
func BenchmarkGlobalOrder(b *testing.B) {
	for _, c := range []struct {
		name          string
		records, size int
	}{{"784B", 60000, 784}, {"150KB", 2000, 150000}} {
		b.Run(c.name, func(b *testing.B) {
			path := idxData(b, c.records, c.size)
			orders := []struct {
				name  string
				stage []actors.Stage
			}{{"sequential", nil}, {"window", []actors.Stage{actors.Shuffle{Window: 4096, Seed: 1}}},
				{"global", []actors.Stage{actors.Shuffle{Global: true, Seed: 1}}}}
			passes := make([]func(), len(orders))
			for i, o := range orders {
				passes[i] = idxRun(b, path, c.records, o.stage)
			}
			took, cpu := make([]time.Duration, len(orders)), make([]time.Duration, len(orders))
			b.ResetTimer()
			for i := range b.N {
				for k := range orders {
					k = (k + i) % len(orders)
					before := processCPU(b)
					timedRun(b, &took[k], passes[k])
					cpu[k] += processCPU(b) - before
				}
			}
			rate := func(k int) float64 { return float64(c.records*b.N) / took[k].Seconds() }
			for k, o := range orders {
				b.ReportMetric(rate(k), o.name+"-samples/s")
				b.ReportMetric(float64(cpu[k].Nanoseconds())/float64(c.records*b.N), o.name+"-cpu-ns/sample")
			}
			b.ReportMetric(rate(2)/rate(1), "global/window")
			b.ReportMetric(rate(2)/rate(0), "global/sequential")
		})
	}
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &u))
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// idxData writes an IDX file of n records of size bytes (uint8), each
// record's first bytes its index, and returns its path.
func idxData(b *testing.B, n, size int) string {
	data := make([]byte, n*size)
	for r := range n {
		binary.LittleEndian.PutUint32(data[r*size:], uint32(r))
	}
	return writeIDX(b, filepath.Join(b.TempDir(), "data-idx1-ubyte"), []uint32{uint32(n), uint32(size)}, data, false)
}

// idxRun returns a function that runs a pass of Files(path) -> order ->
// batch(64) -> double buffer -> device, checking the device got every
// record.
func idxRun(b *testing.B, path string, records int, order []actors.Stage) func() {
	var stepped atomic.Int64
	stages := append(append([]actors.Stage{actors.Files{Paths: []string{"idx:" + path}}}, order...), actors.Batch{Size: benchBatch}, actors.DoubleBuffer{})
	p, err := actors.NewDevices(stages, actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error {
		consume(it.Slots)
		stepped.Add(int64(it.Instances))
		return nil
	}}, actors.Options{System: sharedSys})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Close()) })
	passes := 0
	pass := func() {
		if passes++; passes > 1 {
			require.NoError(b, p.Reset())
		}
		require.NoError(b, p.Run(context.Background()))
		require.Equal(b, int64(records), stepped.Load())
		stepped.Store(0)
	}
	pass()
	return pass
}

// BenchmarkGlobalStartup measures a global order's start-up: building the
// pipeline over a sparse IDX file of 10^6 or 10^9 one-byte records (its
// index is its header) and reading its first batch, in "ms/first-batch".
// docs/determinism.md quotes it.
//
//	go test -run '^$' -bench GlobalStartup ./actors
func BenchmarkGlobalStartup(b *testing.B) {
	for _, n := range []uint32{1_000_000, 1_000_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "sparse-idx2-ubyte")
			header := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{0, 0, 8, 2}, n), 1)
			require.NoError(b, os.WriteFile(path, header, 0o644))
			require.NoError(b, os.Truncate(path, int64(len(header))+int64(n)))
			stages := []actors.Stage{actors.Files{Paths: []string{"idx:" + path}}, actors.Shuffle{Global: true, Seed: 1}, actors.Batch{Size: benchBatch}}
			var took time.Duration
			for b.Loop() {
				start := time.Now()
				p, err := actors.New(stages, actors.Options{System: sharedSys})
				require.NoError(b, err)
				_, err = p.Next(context.Background())
				require.NoError(b, err)
				took += time.Since(start)
				require.NoError(b, p.Close())
			}
			b.ReportMetric(float64(took.Microseconds())/1e3/float64(b.N), "ms/first-batch")
		})
	}
}
