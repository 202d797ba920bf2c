package benchmark_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/harness/benchmark"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// file writes n records of a [1,4] uint8 image and an int64 label.
func file(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.rio")
	_, err := readers.WriteRecordFile(path, recordio.WriterOptions{MaxChunkBytes: 1000}, readers.Samples(n, func(r int) (tensor.Slots, error) {
		return tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 4}, []uint8{1, 2, 3, uint8(r)})},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r)})},
		}, nil
	}))
	require.NoError(t, err)
	return path
}

// The measurements run real pipelines: every sample reaches the device,
// the device sees every warm step, and every pass is measured; nothing is
// left running.
func TestMeasurements(t *testing.T) {
	sys := actors.NewSystem()
	defer sys.Shutdown()
	cfg := benchmark.Config{Path: file(t, 300), Window: 50, Batch: 20, System: sys}

	samples := 0
	total, first, err := cfg.Pass(t.Context(), true, func(s tensor.Slots) {
		n, err := s.Instances()
		require.NoError(t, err)
		samples += n
	})
	require.NoError(t, err)
	require.Equal(t, 300, samples)
	require.Positive(t, first)
	require.GreaterOrEqual(t, total, first)

	// A running pipeline's devices step from Start on, before the first
	// Pass is called: the count is reset only between passes, when the
	// devices wait for the Reset that Pass sends.
	var stepped atomic.Int64
	run, err := cfg.Start(false, func(s tensor.Slots) {
		n, err := s.Instances()
		require.NoError(t, err)
		stepped.Add(int64(n))
	})
	require.NoError(t, err)
	for pass := range 3 {
		took, err := run.Pass(t.Context())
		require.NoError(t, err)
		require.Positive(t, took)
		require.Equal(t, int64(300), stepped.Swap(0), "pass %d", pass)
	}
	require.NoError(t, run.Close())

	d, err := cfg.Device(t.Context(), 2)
	require.NoError(t, err)
	from, to := benchmark.WarmPasses()
	require.Len(t, d.Waits, (to-from+1)*15, "a wait before each step of the warm passes: 15 batches each")
	require.Equal(t, 2*d.PerBatch, d.StepAsked)
	require.GreaterOrEqual(t, d.StepTaken, d.StepAsked, "a timer never wakes early")
	require.Greater(t, d.Busy, 0.0)
	require.LessOrEqual(t, d.Busy, 1.0)

	m, err := cfg.Memory(t.Context(), 4, func(tensor.Slots) {})
	require.NoError(t, err)
	require.Len(t, m.Heap, 4)
	require.Positive(t, m.AllocsPerBatch)
	require.Positive(t, m.PeakLive)
	require.Empty(t, registered.Actors(sys), "no actor left")
}

// Loopback moves real bytes through a TCP connection and says how fast;
// a cancelled context ends it with an error, and neither leaves a
// goroutine (TestMain).
func TestLoopback(t *testing.T) {
	rate, err := benchmark.Loopback(t.Context(), 4<<20)
	require.NoError(t, err)
	require.Positive(t, rate)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = benchmark.Loopback(ctx, 1<<40)
	require.ErrorIs(t, err, context.Canceled)
}

// A process's CPU time is read from /proc: this process has used some,
// and a process that does not exist has none.
func TestProcessCPUTime(t *testing.T) {
	for benchmark.CPUTime() < 10*time.Millisecond { // a tick of /proc's clock
	}
	require.Positive(t, benchmark.ProcessCPUTime(os.Getpid()))
	require.Zero(t, benchmark.ProcessCPUTime(1<<30))
}

// Measurements take turns at going first, each run repeat times, and the
// first error stops them.
func TestTakeTurns(t *testing.T) {
	var order []int
	require.NoError(t, benchmark.TakeTurns(3, 3, func(r int) error { order = append(order, r); return nil }))
	require.Equal(t, []int{0, 1, 2, 1, 2, 0, 2, 0, 1}, order)
	stop := errors.New("stop")
	calls := 0
	err := benchmark.TakeTurns(3, 3, func(r int) error {
		calls++
		if r == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, calls)
}
