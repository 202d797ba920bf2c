package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoDriver is returned by Open and Count on a machine without the CUDA
// driver (libcuda.so.1 cannot be loaded, or lacks a function this package
// calls): every machine without an NVIDIA GPU.
var ErrNoDriver = errors.New("cuda: no CUDA driver")

// Library is the CUDA driver's file name, as the dynamic loader finds it.
const Library = "libcuda.so.1"

// driver is the CUDA driver API, bound at run time. CUresult is int32;
// CUdeviceptr uint64; CUcontext, CUstream, CUmodule and CUfunction are
// handles (uintptr). The _v2 names are the 64-bit ABI: the unversioned
// symbols are the old 32-bit one.
type driver struct {
	cuInit                       func(flags uint32) int32
	cuDeviceGetCount             func(count *int32) int32
	cuDeviceGet                  func(dev *int32, ordinal int32) int32
	cuDeviceGetName              func(name *byte, size int32, dev int32) int32
	cuDevicePrimaryCtxRetain     func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease_v2 func(dev int32) int32
	cuCtxSetCurrent              func(ctx uintptr) int32
	cuStreamCreate               func(stream *uintptr, flags uint32) int32
	cuStreamDestroy_v2           func(stream uintptr) int32
	cuStreamSynchronize          func(stream uintptr) int32
	cuMemAlloc_v2                func(dptr *uint64, size uintptr) int32
	cuMemFree_v2                 func(dptr uint64) int32
	cuMemHostAlloc               func(p *unsafe.Pointer, size uintptr, flags uint32) int32
	cuMemFreeHost                func(p unsafe.Pointer) int32
	cuMemcpyHtoD_v2              func(dst uint64, src unsafe.Pointer, size uintptr) int32
	cuMemcpyHtoDAsync_v2         func(dst uint64, src unsafe.Pointer, size uintptr, stream uintptr) int32
	cuMemcpyDtoH_v2              func(dst unsafe.Pointer, src uint64, size uintptr) int32
	cuModuleLoadData             func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleUnload               func(mod uintptr) int32
	cuModuleGetFunction          func(fn *uintptr, mod uintptr, name *byte) int32
	cuLaunchKernel               func(fn uintptr, gx, gy, gz, bx, by, bz, sharedMem uint32, stream uintptr, params, extra unsafe.Pointer) int32
	cuGetErrorName               func(res int32, name **byte) int32
}

// The driver is loaded once per process.
var (
	loadOnce  sync.Once
	loaded    *driver
	loadError error
)

// load loads the CUDA driver and initialises it.
func load() (*driver, error) {
	loadOnce.Do(func() {
		loaded, loadError = bind(Library)
		if loadError == nil {
			loadError = loaded.check("cuInit", loaded.cuInit(0))
		}
	})
	return loaded, loadError
}

// bind loads the library at name and binds every function the package
// calls; a library that cannot be loaded or lacks one is ErrNoDriver.
func bind(name string) (*driver, error) {
	// dlopen's reason is dlerror's, which is per OS thread: without the
	// lock the goroutine may ask another thread, and the reason was empty
	// (once in a CI run).
	runtime.LockOSThread()
	lib, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot load %s: %w", ErrNoDriver, name, err)
	}
	d := &driver{}
	for _, f := range []struct {
		name string
		fn   any
	}{
		{"cuInit", &d.cuInit}, {"cuDeviceGetCount", &d.cuDeviceGetCount}, {"cuDeviceGet", &d.cuDeviceGet},
		{"cuDeviceGetName", &d.cuDeviceGetName}, {"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease_v2}, {"cuCtxSetCurrent", &d.cuCtxSetCurrent},
		{"cuStreamCreate", &d.cuStreamCreate}, {"cuStreamDestroy_v2", &d.cuStreamDestroy_v2},
		{"cuStreamSynchronize", &d.cuStreamSynchronize}, {"cuMemAlloc_v2", &d.cuMemAlloc_v2}, {"cuMemFree_v2", &d.cuMemFree_v2},
		{"cuMemHostAlloc", &d.cuMemHostAlloc}, {"cuMemFreeHost", &d.cuMemFreeHost}, {"cuMemcpyHtoD_v2", &d.cuMemcpyHtoD_v2},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync_v2}, {"cuMemcpyDtoH_v2", &d.cuMemcpyDtoH_v2},
		{"cuModuleLoadData", &d.cuModuleLoadData}, {"cuModuleUnload", &d.cuModuleUnload},
		{"cuModuleGetFunction", &d.cuModuleGetFunction}, {"cuLaunchKernel", &d.cuLaunchKernel}, {"cuGetErrorName", &d.cuGetErrorName},
	} {
		if _, err := purego.Dlsym(lib, f.name); err != nil {
			return nil, fmt.Errorf("%w: %s has no %s: %w", ErrNoDriver, name, f.name, err)
		}
		purego.RegisterLibFunc(f.fn, lib, f.name)
	}
	return d, nil
}

// check turns a CUresult into an error naming the call and the result.
func (d *driver) check(call string, res int32) error {
	if res == 0 {
		return nil
	}
	name := "unknown"
	var p *byte
	if d.cuGetErrorName(res, &p) == 0 && p != nil {
		name = goString(p)
	}
	return fmt.Errorf("cuda: %s: error %d (%s)", call, res, name)
}

// goString copies a NUL-terminated C string the driver owns.
func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// Count is how many CUDA devices the machine has; ErrNoDriver without a
// driver.
func Count() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}
