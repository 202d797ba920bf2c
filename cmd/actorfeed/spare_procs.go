package main

import (
	"os"
	"runtime"
	"sync"
)

// startProcs is GOMAXPROCS as the runtime set it at start: the cores this
// process may use (its CPU affinity, a cgroup's quota), or the GOMAXPROCS
// the user gave.
var startProcs = runtime.GOMAXPROCS(0)

var spareOnce sync.Once

// spareProcs gives the Go scheduler twice as many Ps as startProcs, once
// a process, unless the user set GOMAXPROCS: for a decode map whose
// workers, one a core, spend half their time in TurboJPEG (docs/images.md
// has the figures). A goroutine in a C call keeps its P until the
// runtime's monitor takes it back and hands it to another thread; with
// no P idle, every call meant that retake and a thread woken for it, and
// on this project's machines Linux then left a core idle for
// milliseconds at a time while two of the process's threads shared the
// other. With a P to spare for each worker's C call, the goroutines that
// wait find one at once.
func spareProcs() {
	spareOnce.Do(func() {
		if _, set := os.LookupEnv("GOMAXPROCS"); !set {
			runtime.GOMAXPROCS(2 * startProcs)
		}
	})
}
