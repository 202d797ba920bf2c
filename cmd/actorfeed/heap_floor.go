package main

import (
	"fmt"
	"os"
)

// heapFloorBytes is the heap floor of the CLI's processes of the data
// service (serve, run --service, bench --service-workers) when GOGC is not
// set. Their live heaps are a few credit windows, while a client
// allocates two copies of every batch it receives (the remote's envelope,
// then the batch: protobuf-go cannot alias bytes) and a worker one of
// every batch it makes and another as the remote marshals it: the
// collector, which runs each time the heap doubles, ran every few MB. The
// floor trades some RSS for much of that CPU (docs/performance.md has
// both). A higher GOGC did as well on small samples but cost throughput on
// large ones, whose live heap is large already; a memory limit with the
// collector off (GOMEMLIMIT) would thrash once the live heap neared it.
const heapFloorBytes = 64 << 20

// heapFloor is never read or written: untouched, its pages take no
// memory, but the collector counts it as live, so it runs once the heap
// is twice the floor at least.
var heapFloor []byte

// raiseHeapFloor sets the heap floor, unless the user set GOGC.
func raiseHeapFloor() {
	if _, set := os.LookupEnv("GOGC"); !set && heapFloor == nil {
		heapFloor = make([]byte, heapFloorBytes)
	}
}

// heapFloorNote says the heap floor the processes run with.
func heapFloorNote() string {
	if heapFloor == nil {
		return "no heap floor (GOGC is set)"
	}
	return fmt.Sprintf("a heap floor of %d MiB", heapFloorBytes>>20)
}
