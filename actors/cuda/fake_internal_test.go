package cuda

import (
	"context"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
)

// fakeGPU is a driver over host memory: device memory is a map of byte
// slices, the kernel sums bytes in Go. It checks what a real driver would
// refuse: a call without the context current on the calling thread is
// not detectable here, but memory freed twice or never, kernels over
// unknown memory and wrong kernel parameters are.
type fakeGPU struct {
	mu      sync.Mutex
	next    uint64
	dev     map[uint64][]byte
	host    map[unsafe.Pointer][]byte
	streams int
	failAt  string // the call that fails, if any
}

func newFakeGPU() *fakeGPU {
	return &fakeGPU{next: 1 << 20, dev: map[uint64][]byte{}, host: map[unsafe.Pointer][]byte{}}
}

func (f *fakeGPU) res(call string) int32 {
	if call == f.failAt {
		return 2 // CUDA_ERROR_OUT_OF_MEMORY
	}
	return 0
}

func (f *fakeGPU) driver() *driver {
	name := []byte("Fake GPU\x00")
	errName := []byte("CUDA_ERROR_OUT_OF_MEMORY\x00")
	return &driver{
		cuInit:           func(uint32) int32 { return 0 },
		cuDeviceGetCount: func(n *int32) int32 { *n = 1; return 0 },
		cuDeviceGet:      func(dev *int32, ordinal int32) int32 { *dev = ordinal; return 0 },
		cuDeviceGetName: func(b *byte, size int32, _ int32) int32 {
			copy(unsafe.Slice(b, size), name)
			return 0
		},
		cuDevicePrimaryCtxRetain:     func(ctx *uintptr, _ int32) int32 { *ctx = 1; return 0 },
		cuDevicePrimaryCtxRelease_v2: func(int32) int32 { return 0 },
		cuCtxSetCurrent:              func(uintptr) int32 { return 0 },
		cuStreamCreate: func(s *uintptr, _ uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.streams++
			*s = uintptr(f.streams)
			return 0
		},
		cuStreamDestroy_v2: func(uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.streams--
			return 0
		},
		cuStreamSynchronize: func(uintptr) int32 { return 0 },
		cuMemAlloc_v2: func(p *uint64, size uintptr) int32 {
			if r := f.res("cuMemAlloc_v2"); r != 0 {
				return r
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.next += uint64(size) + 4096
			f.dev[f.next] = make([]byte, size)
			*p = f.next
			return 0
		},
		cuMemFree_v2: func(p uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.dev[p]; !ok {
				return 1
			}
			delete(f.dev, p)
			return 0
		},
		cuMemHostAlloc: func(p *unsafe.Pointer, size uintptr, _ uint32) int32 {
			if r := f.res("cuMemHostAlloc"); r != 0 {
				return r
			}
			words := make([]uint64, (size+7)/8)
			b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), size)
			f.mu.Lock()
			defer f.mu.Unlock()
			*p = unsafe.Pointer(unsafe.SliceData(b))
			f.host[*p] = b
			return 0
		},
		cuMemFreeHost: func(p unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.host[p]; !ok {
				return 1
			}
			delete(f.host, p)
			return 0
		},
		cuMemcpyHtoD_v2:      f.copyIn,
		cuMemcpyHtoDAsync_v2: func(dst uint64, src unsafe.Pointer, size, _ uintptr) int32 { return f.copyIn(dst, src, size) },
		cuMemcpyDtoH_v2: func(dst unsafe.Pointer, src uint64, size uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			copy(unsafe.Slice((*byte)(dst), size), f.dev[src])
			return 0
		},
		cuModuleLoadData:    func(m *uintptr, _ unsafe.Pointer) int32 { *m = 1; return 0 },
		cuModuleUnload:      func(uintptr) int32 { return 0 },
		cuModuleGetFunction: func(fn *uintptr, _ uintptr, _ *byte) int32 { *fn = 1; return 0 },
		cuLaunchKernel:      f.launch,
		cuGetErrorName: func(_ int32, p **byte) int32 {
			*p = &errName[0]
			return 0
		},
	}
}

func (f *fakeGPU) copyIn(dst uint64, src unsafe.Pointer, size uintptr) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.dev[dst]
	if !ok || uintptr(len(d)) < size {
		return 1
	}
	copy(d, unsafe.Slice((*byte)(src), size))
	return 0
}

// launch runs sum_bytes: its parameters are pointers to (data, n, out).
func (f *fakeGPU) launch(_ uintptr, _, _, _, bx, _, _, _ uint32, _ uintptr, params, _ unsafe.Pointer) int32 {
	p := (*[3]unsafe.Pointer)(params)
	data, n, out := *(*uint64)(p[0]), *(*uint64)(p[1]), *(*uint64)(p[2])
	f.mu.Lock()
	defer f.mu.Unlock()
	src, ok1 := f.dev[data]
	sum, ok2 := f.dev[out]
	if !ok1 || !ok2 || uint64(len(src)) < n || len(sum) != 8 || bx != blockThreads {
		return 1
	}
	*(*uint64)(unsafe.Pointer(&sum[0])) += HostChecksum(src[:n])
	return 0
}

// With a driver (here over host memory), batches made in its page-locked
// Storage go to the devices' streams, the kernel's checksum is the host's,
// and everything the devices and the pipeline took is given back.
func TestDevicesOverAFakeDriver(t *testing.T) {
	gpu := newFakeGPU()
	drv := gpu.driver()
	devs := make([]*Device, 2)
	for i := range devs {
		d, err := open(drv, 0)
		require.NoError(t, err)
		require.Equal(t, "Fake GPU", d.Name())
		devs[i] = d
	}
	paths := testutil.WriteFiles(t, 2, 500, 4096)
	var mu sync.Mutex
	var host uint64
	step := func(ctx context.Context, it actors.Item) error {
		for _, s := range it.Slots {
			mu.Lock()
			host += HostChecksum(s.Bytes())
			mu.Unlock()
		}
		return devs[actors.DeviceFrom(ctx)].Step(ctx, it)
	}
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 32}},
		actors.Devices{N: 2, Step: step, Storage: devs[0].Storage()}, actors.Options{System: sys})
	require.NoError(t, err)
	require.NoError(t, p.Run(testutil.Context(t)))
	require.NoError(t, p.Close())
	sys.Shutdown()
	var sum uint64
	var bytes int64
	for _, d := range devs {
		s, err := d.Checksum()
		require.NoError(t, err)
		sum, bytes = sum+s, bytes+d.Bytes()
	}
	require.Equal(t, host, sum)
	require.Positive(t, bytes)
	require.Empty(t, gpu.host, "page-locked storage given back")
	rate, err := devs[0].CopyRate(1<<20, 3)
	require.NoError(t, err)
	require.Positive(t, rate)
	for _, d := range devs {
		require.NoError(t, d.Close())
		require.NoError(t, d.Close(), "twice")
	}
	require.Empty(t, gpu.dev, "device memory given back")
	require.Zero(t, gpu.streams, "streams destroyed")
	_, err = devs[0].Checksum()
	require.ErrorContains(t, err, "closed", "a closed device refuses calls")
}

// A driver call that fails is an error naming the call and the driver's
// name of the result; a failing Storage fails the pipeline with it.
func TestDriverErrorsNameTheCall(t *testing.T) {
	gpu := newFakeGPU()
	gpu.failAt = "cuMemHostAlloc"
	d, err := open(gpu.driver(), 0)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.Storage().Alloc(64)
	require.ErrorContains(t, err, "cuda: cuMemHostAlloc: error 2 (CUDA_ERROR_OUT_OF_MEMORY)")

	gpu.failAt = "cuMemAlloc_v2"
	_, err = open(gpu.driver(), 0)
	require.ErrorContains(t, err, "cuda: cuMemAlloc_v2: error 2")
}
