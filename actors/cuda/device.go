package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/actorfeed/actorfeed/actors"
)

// memHostAllocPortable makes pinned memory usable from every context, so
// that one Storage serves every device actor.
const memHostAllocPortable = 1

// Device is one GPU as one device actor uses it: every driver call runs on
// an OS thread of its own with the GPU's primary context current there,
// and its copies and kernels go to a stream of its own.
type Device struct {
	drv     *driver
	ordinal int32
	name    string
	calls   chan func()
	done    chan struct{}

	// Owned by the device's thread.
	stream  uintptr
	module  uintptr
	kernel  uintptr
	buf     uint64 // device memory a batch's slot is copied to
	bufSize int
	sum     uint64 // device address of the checksum

	bytes atomic.Int64
	busy  atomic.Int64 // nanoseconds the device's thread spent in Step's calls

	mu     sync.RWMutex // held to send a call; Close takes it to close calls
	closed bool
}

// Open opens GPU ordinal (0 the first): ErrNoDriver without a CUDA
// driver. Close it when done.
func Open(ordinal int) (*Device, error) {
	drv, err := load()
	if err != nil {
		return nil, err
	}
	return open(drv, ordinal)
}

// open opens GPU ordinal through drv.
func open(drv *driver, ordinal int) (*Device, error) {
	d := &Device{drv: drv, calls: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go d.run(ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// run is the device's thread: it sets the device up, then runs calls until
// Close.
func (d *Device) run(ordinal int, started chan<- error) {
	runtime.LockOSThread() // a context is current per OS thread
	defer runtime.UnlockOSThread()
	defer close(d.done)
	if err := d.setUp(ordinal); err != nil {
		d.tearDown()
		started <- err
		return
	}
	started <- nil
	for call := range d.calls {
		call()
	}
	d.tearDown()
}

// setUp makes the GPU's primary context current, and creates the stream,
// the kernel and the checksum.
func (d *Device) setUp(ordinal int) error {
	drv := d.drv
	var dev int32
	if err := drv.check("cuDeviceGet", drv.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return err
	}
	d.ordinal = dev
	name := make([]byte, 256)
	if err := drv.check("cuDeviceGetName", drv.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return err
	}
	d.name = goString(&name[0])
	var ctx uintptr
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain(&ctx, dev)); err != nil {
		return err
	}
	ptx := []byte(sumBytesPTX)
	fn := []byte(kernelName)
	var zero uint64
	return errors.Join(
		drv.check("cuCtxSetCurrent", drv.cuCtxSetCurrent(ctx)),
		drv.check("cuStreamCreate", drv.cuStreamCreate(&d.stream, 0)),
		drv.check("cuModuleLoadData", drv.cuModuleLoadData(&d.module, unsafe.Pointer(&ptx[0]))),
		drv.check("cuModuleGetFunction", drv.cuModuleGetFunction(&d.kernel, d.module, &fn[0])),
		drv.check("cuMemAlloc_v2", drv.cuMemAlloc_v2(&d.sum, 8)),
		drv.check("cuMemcpyHtoD_v2", drv.cuMemcpyHtoD_v2(d.sum, unsafe.Pointer(&zero), 8)))
}

// tearDown releases what setUp made, on the device's thread.
func (d *Device) tearDown() {
	drv := d.drv
	if d.buf != 0 {
		drv.cuMemFree_v2(d.buf)
	}
	if d.sum != 0 {
		drv.cuMemFree_v2(d.sum)
	}
	if d.module != 0 {
		drv.cuModuleUnload(d.module)
	}
	if d.stream != 0 {
		drv.cuStreamDestroy_v2(d.stream)
	}
	drv.cuDevicePrimaryCtxRelease_v2(d.ordinal)
}

// do runs f on the device's thread and returns its error.
func (d *Device) do(f func() error) error {
	errc := make(chan error, 1)
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return fmt.Errorf("cuda: device %d is closed", d.ordinal)
	}
	d.calls <- func() { errc <- f() }
	d.mu.RUnlock()
	return <-errc
}

// Name is the GPU's name, as the driver gives it.
func (d *Device) Name() string { return d.name }

// Bytes is how many bytes Step copied to the GPU.
func (d *Device) Bytes() int64 { return d.bytes.Load() }

// Busy is how long Step kept the GPU's stream busy (its copies and
// kernels, waited for).
func (d *Device) Busy() time.Duration { return time.Duration(d.busy.Load()) }

// Close releases the GPU's stream, memory and kernel.
func (d *Device) Close() error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.calls)
	}
	d.mu.Unlock()
	<-d.done
	return nil
}

// Step is an actors.StepFunc: it copies every slot of the batch to the GPU
// on the device's stream, runs the checksum kernel over it, and waits for
// both, so that the batch's storage may be recycled when it returns. The
// copy is a DMA from page-locked memory when the batch was made in
// Storage's; from ordinary Go memory the driver stages it.
func (d *Device) Step(_ context.Context, it actors.Item) error {
	return d.do(func() error {
		start := time.Now()
		defer func() { d.busy.Add(int64(time.Since(start))) }()
		for _, s := range it.Slots {
			if err := d.launch(s.Bytes()); err != nil {
				return err
			}
		}
		return d.drv.check("cuStreamSynchronize", d.drv.cuStreamSynchronize(d.stream))
	})
}

// launch copies b to the device buffer and enqueues the kernel over it;
// on the device's thread.
func (d *Device) launch(b []byte) error {
	drv := d.drv
	if len(b) == 0 {
		return nil
	}
	if len(b) > d.bufSize {
		if d.buf != 0 {
			if err := drv.check("cuMemFree_v2", drv.cuMemFree_v2(d.buf)); err != nil {
				return err
			}
			d.buf, d.bufSize = 0, 0
		}
		if err := drv.check("cuMemAlloc_v2", drv.cuMemAlloc_v2(&d.buf, uintptr(len(b)))); err != nil {
			return err
		}
		d.bufSize = len(b)
	}
	if err := drv.check("cuMemcpyHtoDAsync_v2", drv.cuMemcpyHtoDAsync_v2(d.buf, unsafe.Pointer(&b[0]), uintptr(len(b)), d.stream)); err != nil {
		return err
	}
	d.bytes.Add(int64(len(b)))
	// kernelParams is an array of pointers to the arguments; they are Go
	// memory, pinned for the call.
	data, n, out := d.buf, uint64(len(b)), d.sum
	params := &[3]unsafe.Pointer{unsafe.Pointer(&data), unsafe.Pointer(&n), unsafe.Pointer(&out)}
	var pin runtime.Pinner
	pin.Pin(params)
	pin.Pin(&data)
	pin.Pin(&n)
	pin.Pin(&out)
	defer pin.Unpin()
	blocks := uint32(min(maxBlocks, (len(b)+blockThreads-1)/blockThreads))
	return drv.check("cuLaunchKernel", drv.cuLaunchKernel(d.kernel, blocks, 1, 1, blockThreads, 1, 1, 0, d.stream, unsafe.Pointer(params), nil))
}

// Checksum is the sum of every byte Step copied, as the GPU computed it
// (HostChecksum on the host).
func (d *Device) Checksum() (uint64, error) {
	var sum uint64
	err := d.do(func() error {
		drv := d.drv
		return errors.Join(drv.check("cuStreamSynchronize", drv.cuStreamSynchronize(d.stream)),
			drv.check("cuMemcpyDtoH_v2", drv.cuMemcpyDtoH_v2(unsafe.Pointer(&sum), d.sum, 8)))
	})
	return sum, err
}

// Storage is page-locked host memory for actors.Devices.Storage, usable by
// every device's copies (portable). Close the pipeline before the device:
// storage freed after the device is closed is not given back.
func (d *Device) Storage() actors.Storage { return pinned{d} }

type pinned struct{ d *Device }

func (p pinned) Alloc(size int) ([]byte, error) {
	var ptr unsafe.Pointer
	err := p.d.do(func() error {
		return p.d.drv.check("cuMemHostAlloc", p.d.drv.cuMemHostAlloc(&ptr, uintptr(size), memHostAllocPortable))
	})
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(ptr), size), nil
}

func (p pinned) Free(b []byte) {
	ptr := unsafe.Pointer(unsafe.SliceData(b))
	_ = p.d.do(func() error { return p.d.drv.check("cuMemFreeHost", p.d.drv.cuMemFreeHost(ptr)) })
}

// CopyRate measures a plain host-to-device copy of size bytes of
// page-locked memory, repeat times: the bytes a second the GPU takes
// without a pipeline, which a pipeline's copies compare with.
func (d *Device) CopyRate(size, repeat int) (float64, error) {
	var rate float64
	err := d.do(func() error {
		drv := d.drv
		var host unsafe.Pointer
		if err := drv.check("cuMemHostAlloc", drv.cuMemHostAlloc(&host, uintptr(size), memHostAllocPortable)); err != nil {
			return err
		}
		defer drv.cuMemFreeHost(host)
		var dev uint64
		if err := drv.check("cuMemAlloc_v2", drv.cuMemAlloc_v2(&dev, uintptr(size))); err != nil {
			return err
		}
		defer drv.cuMemFree_v2(dev)
		start := time.Now()
		for range max(repeat, 1) {
			if err := drv.check("cuMemcpyHtoD_v2", drv.cuMemcpyHtoD_v2(dev, host, uintptr(size))); err != nil {
				return err
			}
		}
		rate = float64(size) * float64(max(repeat, 1)) / time.Since(start).Seconds()
		return nil
	})
	return rate, err
}
