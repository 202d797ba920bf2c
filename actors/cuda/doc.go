// Package cuda feeds batches to a real NVIDIA GPU, with no cgo: it loads
// the CUDA driver (libcuda.so.1) when a program asks for a device
// (purego), so that every build of actorfeed runs on machines without one,
// where Open returns ErrNoDriver.
//
// A Device is one GPU (by ordinal) as one device actor uses it: a stream
// of its own, and an OS thread of its own on which every driver call runs
// (a CUDA context is current per OS thread, and goroutines move between
// threads). Device.Storage is page-locked host memory (cuMemHostAlloc)
// for actors.Devices.Storage, so that the batch stage assembles batches
// where the GPU copies from by DMA; Device.Step copies a batch to the GPU
// on the device's stream and runs a kernel (PTX embedded as text, compiled
// by the driver for the GPU it finds) that reads every byte and adds it to
// a checksum (Device.Checksum), which tests compare with the host's.
//
// Status: it has run on an NVIDIA H200 (driver 580): TestBatchesReachTheGPU
// passed there, every byte's checksum the host's, and `run --device cuda`
// delivered to it (docs/performance.md, "On a GPU host"). The project's
// own machines have no GPU, so its GPU test skips with "no CUDA driver"
// there, and CI tests what does not need one: the loader's refusals, and
// the Device's threads, streams, storage, kernel parameters and errors
// over a fake driver that keeps device memory in host memory. The calls
// follow the CUDA driver API's rules: a context current per OS thread,
// page-locked memory for asynchronous copies, a stream synchronised
// before its memory is reused.
//
// cuda may import actors (and what it imports) and purego; only cmd
// imports it.
package cuda
