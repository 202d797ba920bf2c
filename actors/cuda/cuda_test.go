package cuda_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/actors/cuda"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens GPU 0, or skips the test on a machine without a CUDA driver,
// saying so.
func open(t *testing.T) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// Without a driver, Open says so and wraps ErrNoDriver. On a machine
// with one, the device it opened is closed: left open, its thread
// outlived the tests (goleak, on an H200).
func TestOpenSaysWhenThereIsNoDriver(t *testing.T) {
	d, err := cuda.Open(0)
	if err == nil {
		require.NoError(t, d.Close())
		t.Skip("this machine has a CUDA driver")
	}
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	require.ErrorContains(t, err, "no CUDA driver")
	_, err = cuda.Count()
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}

// Every byte of every batch reaches the GPU: two device actors, each with
// a stream of its own, step batches made in page-locked storage, and the
// GPU's checksum of what they copied equals the host's.
func TestBatchesReachTheGPU(t *testing.T) {
	gpus := []*cuda.Device{open(t), open(t)}
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 2000, 1<<16)
	var mu sync.Mutex
	var host uint64
	step := func(ctx context.Context, it actors.Item) error {
		var sum uint64
		for _, s := range it.Slots {
			sum += cuda.HostChecksum(s.Bytes())
		}
		mu.Lock()
		host += sum
		mu.Unlock()
		return gpus[actors.DeviceFrom(ctx)].Step(ctx, it)
	}
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 256, Seed: 1}, actors.Batch{Size: 64}},
		actors.Devices{N: 2, Step: step, Storage: gpus[0].Storage()}, actors.Options{System: sys})
	require.NoError(t, err)
	for pass := range 2 {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		require.NoError(t, p.Run(ctx))
	}
	require.NoError(t, p.Close())
	require.Empty(t, registered.Actors(sys))
	var gpu uint64
	for _, d := range gpus {
		sum, err := d.Checksum()
		require.NoError(t, err)
		gpu += sum
		require.Positive(t, d.Bytes())
	}
	require.Equal(t, host, gpu, "the GPU's checksum of what it was sent")
}
