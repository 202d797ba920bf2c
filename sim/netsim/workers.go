package netsim

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/internal/serveproc"
	"github.com/actorfeed/actorfeed/service"
)

// Config says how Run starts a scenario's workers.
type Config struct {
	// WorkerCommand, when set, runs every worker as a process of its own:
	// the command (actorfeed serve and its flags, say) with --listen,
	// --advertise and --root appended. It must print a line "serving on
	// ADDR" once it serves, and exit with status 130 (128 + SIGINT) on
	// SIGINT once its node is stopped cleanly (actorfeed serve
	// --check-leaks exits 1 when goroutines are left). A crash is SIGKILL. Without it (empty), the workers are
	// nodes in this process.
	WorkerCommand []string
}

// netWorker is a scenario's worker, a node in this process or a process.
type netWorker interface {
	// crash stops it at once, for good.
	crash()
	// pause stops it (true) until as many pause(false) calls resume it.
	pause(on bool)
	// close stops it, resumed first; its error says it did not stop
	// cleanly.
	close() error
}

// pauses counts a worker's pauses: it stops at the first and resumes at
// the last one's end, so that overlapping faults (a freeze while a slow
// worker is stopped) nest.
type pauses struct {
	mu         sync.Mutex
	n          int
	stop, cont func()
}

func (p *pauses) pause(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on:
		if p.n++; p.n == 1 {
			p.stop()
		}
	case p.n > 0:
		if p.n--; p.n == 0 {
			p.cont()
		}
	}
}

// resume ends every pause.
func (p *pauses) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n > 0 {
		p.n = 0
		p.cont()
	}
}

// retryPort calls start with a free loopback port until it is not told
// that the port was taken (between freePort and the node's own listen,
// by another scenario), at most portTries times.
func retryPort[T any](start func(addr string) (T, error)) (T, error) {
	var zero T
	for try := 1; ; try++ {
		addr, err := freePort()
		if err != nil {
			return zero, err
		}
		v, err := start(addr)
		if err == nil || try == portTries || !strings.Contains(err.Error(), "address already in use") {
			return v, err
		}
	}
}

// portTries bounds retryPort.
const portTries = 5

// Bounds of a worker process's life, and of the client node's Close.
const (
	workerStart = 10 * time.Second // to its "serving on" line
	workerStop  = 30 * time.Second // from SIGINT to its exit: a Close, and up to service.RemoteSettle of leak check
	// A node's Close takes about 2 x service.StopGrace; the rest is room
	// for a loaded machine.
	clientStop = 10 * time.Second
)

// inProcessWorker is a worker node in this process, behind px.
type inProcessWorker struct {
	pauses
	node     *service.Node
	px       *Proxy
	stopping sync.WaitGroup
}

func startInProcessWorker(px *Proxy, root string) (*inProcessWorker, error) {
	n, err := retryPort(func(addr string) (*service.Node, error) { return behind(px, addr) })
	if err == nil {
		if _, err = n.Serve(service.WorkerOptions{Roots: []string{root}, Threads: 2}); err != nil {
			n.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	// A node in this process cannot be stopped alone: its path stalls.
	return &inProcessWorker{node: n, px: px, pauses: pauses{stop: px.Stall, cont: px.Resume}}, nil
}

// crash closes the proxy at once, its connections with it; the node's own
// stop, which may wait for the remote's graceful stop, goes on aside
// (close waits for it).
func (w *inProcessWorker) crash() {
	w.px.Close()
	w.stopping.Go(func() { _ = w.node.Close() })
}

func (w *inProcessWorker) close() error {
	w.resume()
	w.stopping.Wait()
	return w.node.Close()
}

// processWorker is a worker process listening behind its proxy.
type processWorker struct {
	pauses
	proc *serveproc.Process
}

// startProcessWorker starts argv as a worker reached through px, and
// waits for its "serving on" line; it tries another port when the one it
// chose was taken meanwhile.
func startProcessWorker(ctx context.Context, argv []string, px *Proxy, root string) (*processWorker, error) {
	return retryPort(func(listen string) (*processWorker, error) {
		args := append(append([]string{}, argv...), "--listen", listen, "--advertise", px.Addr(), "--root", root)
		proc, err := serveproc.Start(ctx, args, workerStart)
		if err != nil {
			return nil, err
		}
		px.SetTarget(listen)
		return &processWorker{proc: proc, pauses: pauses{stop: func() { proc.Pause(true) }, cont: func() { proc.Pause(false) }}}, nil
	})
}

// crash kills the process: its connections close with it, its proxy stays
// (and finds nothing listening behind it).
func (w *processWorker) crash() { w.proc.Kill() }

// close asks the process to stop and waits, within workerStop, for its
// exit status; a crashed one's is not its own.
func (w *processWorker) close() error {
	w.resume()
	return w.proc.Stop(workerStop)
}
