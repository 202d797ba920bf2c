package netsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/batches"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// Scenario is a data-service scenario: a pipeline whose stages before
// the double buffer run on worker nodes (actors.Service), with a
// fault-injecting proxy before every node, and network faults struck as the
// consumer takes batches. Its batches must be those of the same pipeline
// in one process, each once, in the order; no run may hang, and the
// service stage's memory stays within its credit bound.
type Scenario struct {
	Seed                  uint64
	Workers               int
	Files, Records, Chunk int
	Batch, Window, Passes int
	// Global reads WebDataset shards in the global order (actors.Shuffle.
	// Global) in place of RecordIO files in a window.
	Global bool
	Credit int
	Shard  actors.Shard // the client's rank
	Faults []Fault
	// Slow, when set, is a worker that runs slower than the others for the
	// whole scenario (Slowdown.Worker is -1 when none).
	Slow Slowdown
	// Hostile runs a trainer that misbehaves towards the workers beside the
	// scenario's (hostileTrainer): the scenario's is served exactly once,
	// and the hostile one no more than the workers' limits allow.
	Hostile                 bool
	lease, waitForWorkers   time.Duration
	deadline                time.Duration
	consumerWindow, sources int
}

// FaultKind is a kind of network fault.
type FaultKind string

// The network faults.
const (
	NetDelay FaultKind = "delay" // every chunk forwarded late, for a while
	NetDrop  FaultKind = "drop"  // the connections reset
	NetStall FaultKind = "stall" // nothing forwarded, connections open, for a while
	NetCut   FaultKind = "cut"   // the connections cut part way through a message
	NetCrash FaultKind = "crash" // the worker's node stops for good
	// NetFreeze stops a worker for a while, its timers with it (SIGSTOP,
	// then SIGCONT; a worker in this process: its path stalls).
	NetFreeze FaultKind = "freeze"
)

// Slowdown makes a worker slow: stopped Stopped of every Period (SIGSTOP
// and SIGCONT; a worker in this process has its path stalled so).
type Slowdown struct {
	Worker  int
	Stopped float64
	Period  time.Duration
}

// Fault strikes when the consumer has taken At batches (all passes
// counted): on the path to worker Worker, or with Worker -1 on the path back
// to the client, which every worker's answers take.
type Fault struct {
	At     int
	Kind   FaultKind
	Worker int
	For    time.Duration // how long a delay or stall lasts
	Delay  time.Duration // a delay's latency per forwarded chunk
	Bytes  int           // a cut's bytes forwarded first
}

func (f Fault) String() string {
	where := "the path back"
	if f.Worker >= 0 {
		where = fmt.Sprintf("worker %d", f.Worker)
	}
	switch f.Kind {
	case NetDelay:
		return fmt.Sprintf("@%d delay %v a chunk for %v on %s", f.At, f.Delay, f.For, where)
	case NetStall:
		return fmt.Sprintf("@%d stall for %v on %s", f.At, f.For, where)
	case NetFreeze:
		return fmt.Sprintf("@%d freeze for %v %s", f.At, f.For, where)
	case NetCut:
		return fmt.Sprintf("@%d cut after %d bytes on %s", f.At, f.Bytes, where)
	}
	return fmt.Sprintf("@%d %s %s", f.At, f.Kind, where)
}

// netLease is the scenarios' Service.Lease: short, so that a stall past it
// loses the worker within a scenario.
const netLease = 400 * time.Millisecond

// Generate draws the network scenario of seed: 2 or 3 workers, a small
// data set, one or two passes, and one to four faults, of which at most
// all but one worker's crashes.
func Generate(seed uint64) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x6e6574776f726b)) // "network": a stream of its own
	sc := Scenario{Seed: seed, Workers: 2 + rng.IntN(2), Files: 2 + rng.IntN(4), Records: 100 + rng.IntN(400),
		Chunk: 512 << rng.IntN(4), Batch: []int{4, 8, 16, 32}[rng.IntN(4)], Window: []int{0, 16, 64}[rng.IntN(3)],
		Passes: 1 + rng.IntN(2), Credit: 1 + rng.IntN(8), lease: netLease, waitForWorkers: 20 * time.Second,
		deadline: 60 * time.Second, consumerWindow: 4, sources: 2}
	world := 1 + rng.IntN(3)
	if world > 1 { // a rank of a trainer, padded or not
		sc.Shard = actors.Shard{Rank: rng.IntN(world), World: world, Remainder: order.Remainder(rng.IntN(2))}
	}
	batches := sc.Passes * (sc.Files*sc.Records/world + sc.Batch - 1) / sc.Batch
	crashed := map[int]bool{}
	for range 1 + rng.IntN(4) {
		f := Fault{At: rng.IntN(batches), Kind: []FaultKind{NetDelay, NetDrop, NetStall, NetCut, NetCrash}[rng.IntN(5)],
			Worker: rng.IntN(sc.Workers+1) - 1}
		if f.Kind == NetCrash && (f.Worker < 0 || crashed[f.Worker] || len(crashed) == sc.Workers-1) {
			f.Kind = NetDrop
		}
		switch f.Kind {
		case NetCrash:
			crashed[f.Worker] = true
		case NetDelay:
			f.For, f.Delay = time.Duration(50+rng.IntN(300))*time.Millisecond, time.Duration(1+rng.IntN(5))*time.Millisecond
		case NetStall: // a fifth of a lease to twice one: some are taken for lost and come back
			f.For = time.Duration(float64(netLease) * (0.2 + 1.8*rng.Float64()))
		case NetCut:
			f.Bytes = 1 + rng.IntN(8192)
		}
		sc.Faults = append(sc.Faults, f)
	}
	drawSlowness(&sc, seed, batches)
	// A third of the scenarios read in the global order, from a stream of
	// its own, so that the draws above stay those of the scenarios before.
	sc.Global = rand.New(rand.NewPCG(seed, 0x676c6f62)).IntN(3) == 0 // "glob"
	slices.SortStableFunc(sc.Faults, func(a, b Fault) int { return a.At - b.At })
	return sc
}

// drawSlowness draws, from a stream of its own (the draws above are those
// of the scenarios before it existed), a slow worker in a third of the
// scenarios and a frozen one in a quarter.
func drawSlowness(sc *Scenario, seed uint64, batches int) {
	rng := rand.New(rand.NewPCG(seed, 0x736c6f77)) // "slow"
	sc.Slow = Slowdown{Worker: -1}
	if rng.IntN(3) == 0 {
		sc.Slow = Slowdown{Worker: rng.IntN(sc.Workers), Stopped: 0.3 + 0.4*rng.Float64(), Period: 20 * time.Millisecond}
	}
	if rng.IntN(4) == 0 {
		sc.Faults = append(sc.Faults, Fault{At: rng.IntN(batches), Kind: NetFreeze, Worker: rng.IntN(sc.Workers),
			For: time.Duration(float64(netLease) * (0.2 + 1.8*rng.Float64()))})
	}
}

// Describe is the scenario's shape and faults, in a line.
func (sc Scenario) Describe() string {
	var fs []string
	for _, f := range sc.Faults {
		fs = append(fs, f.String())
	}
	slow := ""
	if sc.Slow.Worker >= 0 {
		slow = fmt.Sprintf(", worker %d stopped %.0f%% of every %v", sc.Slow.Worker, 100*sc.Slow.Stopped, sc.Slow.Period)
	}
	if sc.Hostile {
		fs = append(fs, "a hostile trainer beside it (leases of 1ms, a storm of sessions, credit without end)")
	}
	files, order := fmt.Sprintf("%d files x %d records (chunks of %d bytes)", sc.Files, sc.Records, sc.Chunk), fmt.Sprintf("window %d", sc.Window)
	if sc.Global {
		files, order = fmt.Sprintf("%d shards x %d records", sc.Files, sc.Records), "the global order"
	}
	return fmt.Sprintf("net-%d: %d workers, %s, batch %d, %s, %d pass(es), credit %d, rank %d of %d (%s)%s; %s",
		sc.Seed, sc.Workers, files, sc.Batch, order, sc.Passes, sc.Credit, sc.Shard.Rank, max(sc.Shard.World, 1),
		sc.Shard.Remainder, slow, strings.Join(fs, ", "))
}

// Result is what Run found.
type Result struct {
	Scenario   Scenario
	Verdict    sim.Verdict
	Violations []string
	Err        error
	Batches    int
	Lost       int64 // workers taken for lost, in all
	Duration   time.Duration
	// Where the time went: starting the nodes, the passes through them,
	// and stopping them.
	Start, Run, Stop time.Duration
}

// stages is the scenario's chain.
func (sc Scenario) stages(paths []string) []actors.Stage {
	chain := []actors.Stage{actors.Files{Paths: paths, Threads: sc.sources}}
	switch {
	case sc.Global:
		chain = append(chain, actors.Shuffle{Global: true, Seed: sc.Seed})
	case sc.Window > 0:
		chain = append(chain, actors.Shuffle{Window: sc.Window, Seed: sc.Seed})
	}
	return append(chain, actors.Batch{Size: sc.Batch}, actors.DoubleBuffer{Window: sc.consumerWindow})
}

// Run runs a network scenario: the reference in one process, then the
// service with its proxies and faults, its workers started as cfg says,
// and checks what the consumer took and that every worker stopped cleanly.
func Run(ctx context.Context, sc Scenario, cfg Config) (res Result) {
	res = Result{Scenario: sc, Verdict: sim.Pass}
	start := time.Now()
	defer func() {
		res.Duration = time.Since(start)
		if len(res.Violations) > 0 && res.Verdict != sim.Stopped {
			res.Verdict = sim.Fail
		}
	}()
	dir, err := os.MkdirTemp("", "actorfeed-net-")
	if err != nil {
		res.Violations = append(res.Violations, err.Error())
		return res
	}
	defer os.RemoveAll(dir)
	var paths []string
	for f := range sc.Files {
		format := ""
		if sc.Global {
			format = records.WebDataset
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%d", f)+records.Suffix(format))
		if err := records.WriteAs(format, path, f, sc.Records, sc.Chunk, false); err != nil {
			res.Violations = append(res.Violations, err.Error())
			return res
		}
		paths = append(paths, path)
	}
	ctx, cancel := context.WithTimeout(ctx, sc.deadline)
	defer cancel()
	want, err := netPasses(ctx, sc, paths, nil)
	if err != nil {
		res.Violations = append(res.Violations, fmt.Sprintf("the reference run: %v", err))
		return res
	}
	t0 := time.Now()
	c, err := startCluster(ctx, sc, dir, cfg)
	res.Start = time.Since(t0)
	if err != nil {
		res.Violations = append(res.Violations, err.Error())
		return res
	}
	t0 = time.Now()
	hostile, err := startHostile(ctx, sc, c, paths)
	if err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	got, err := netPasses(ctx, sc, paths, c)
	res.Violations = append(res.Violations, hostile.stop(sc.Workers)...)
	res.Run = time.Since(t0)
	t0 = time.Now()
	res.Violations = append(res.Violations, c.close()...)
	res.Stop = time.Since(t0)
	res.Err, res.Batches = err, c.taken
	for _, w := range c.lost {
		res.Lost += w
	}
	res.Violations = append(res.Violations, c.violations...)
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled):
		res.Verdict = sim.Stopped
	case err != nil:
		res.Violations = append(res.Violations, fmt.Sprintf("the run failed: %v", err))
	default:
		res.Violations = append(res.Violations, compareNet(want, got)...)
	}
	return res
}

// compareNet names the first batch that differs from the reference's.
func compareNet(want, got [][][]uint64) []string {
	for p := range max(len(want), len(got)) {
		if p >= len(want) || p >= len(got) {
			return []string{fmt.Sprintf("%d passes, the reference has %d", len(got), len(want))}
		}
		for b := range max(len(want[p]), len(got[p])) {
			if b >= len(want[p]) || b >= len(got[p]) || !slices.Equal(want[p][b], got[p][b]) {
				return []string{fmt.Sprintf("pass %d: batch %d differs from the reference's (%d batches, the reference %d)", p, b, len(got[p]), len(want[p]))}
			}
		}
	}
	return nil
}

// netPasses reads the scenario's passes: in one process without c, on c's
// workers with it, striking c's faults as batches are taken.
func netPasses(ctx context.Context, sc Scenario, paths []string, c *cluster) ([][][]uint64, error) {
	opts := actors.Options{GroupSize: 8, Shard: sc.Shard}
	if c != nil {
		opts.System = c.client.System()
		opts.Service = &actors.Service{Workers: c.addrs, Credit: sc.Credit, Lease: sc.lease, WaitForWorkers: sc.waitForWorkers}
	}
	p, err := actors.New(sc.stages(paths), opts)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var took func()
	if c != nil {
		took = func() { c.took(p) }
	}
	return batches.Passes(ctx, p, sc.Passes, took)
}

// cluster is a scenario's nodes: the client behind the proxy back, each
// worker behind its own.
type cluster struct {
	sc         Scenario
	client     *service.Node
	back       *Proxy
	workers    []netWorker
	proxies    []*Proxy
	addrs      []string
	taken      int
	lost       []int64
	timers     []*time.Timer
	slowStop   chan struct{}  // ends the slow worker's slowdown
	slowDone   sync.WaitGroup // its goroutine
	violations []string
}

// freePort is a loopback address with a port free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// behind starts a node listening on addr whose peers reach it through
// proxy p.
func behind(p *Proxy, addr string) (*service.Node, error) {
	n, err := service.Listen(service.Config{Listen: addr, Advertise: p.Addr(), Keepalive: time.Second})
	if err != nil {
		return nil, err
	}
	p.SetTarget(addr)
	return n, nil
}

func startCluster(ctx context.Context, sc Scenario, root string, cfg Config) (*cluster, error) {
	c := &cluster{sc: sc}
	var err error
	if c.back, err = NewProxy(); err != nil {
		return nil, err
	}
	if c.client, err = retryPort(func(addr string) (*service.Node, error) { return behind(c.back, addr) }); err != nil {
		c.close()
		return nil, err
	}
	for range sc.Workers {
		p, err := NewProxy()
		if err != nil {
			c.close()
			return nil, err
		}
		c.proxies = append(c.proxies, p)
		var w netWorker
		if len(cfg.WorkerCommand) > 0 {
			w, err = startProcessWorker(ctx, cfg.WorkerCommand, p, root)
		} else {
			w, err = startInProcessWorker(p, root)
		}
		if err != nil {
			c.close()
			return nil, err
		}
		c.workers, c.addrs = append(c.workers, w), append(c.addrs, p.Addr())
	}
	if sl := sc.Slow; sl.Worker >= 0 {
		c.slowStop = make(chan struct{})
		c.slowDone.Go(func() { slowDown(c.workers[sl.Worker], sl, c.slowStop) })
	}
	return c, nil
}

// slowDown pauses w for sl.Stopped of every sl.Period until stop closes
// (the worker's close then resumes it).
func slowDown(w netWorker, sl Slowdown, stop <-chan struct{}) {
	stopped := time.Duration(float64(sl.Period) * sl.Stopped)
	t := time.NewTimer(sl.Period - stopped)
	defer t.Stop()
	for on := false; ; on = !on {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.pause(!on)
		if on {
			t.Reset(sl.Period - stopped)
		} else {
			t.Reset(stopped)
		}
	}
}

// took is called after every batch the consumer took: it strikes the
// faults due and checks the service stage's memory bound.
func (c *cluster) took(p *actors.Pipeline) {
	c.taken++
	for _, f := range c.sc.Faults {
		if f.At == c.taken {
			c.strike(f)
		}
	}
	// The bound: Credit batches of each task in flight, at most Tasks (2)
	// a worker and the head task; the outlet's unsent and unacknowledged
	// ones (Capacity, the double buffer's window).
	bound := (2*c.sc.Workers+1)*c.sc.Credit + 2 + c.sc.consumerWindow // Capacity defaults to 2
	for _, st := range p.StageStats() {
		if st.Kind == actors.KindService && st.Held > bound && len(c.violations) == 0 {
			c.violations = append(c.violations, fmt.Sprintf("the service stage held %d batches, above its bound of %d", st.Held, bound))
		}
	}
	c.lost = c.lost[:0]
	for _, w := range p.ServiceWorkers() {
		c.lost = append(c.lost, w.Lost)
	}
}

// strike applies fault f; a lasting one ends on a timer.
func (c *cluster) strike(f Fault) {
	px := c.back
	if f.Worker >= 0 {
		px = c.proxies[f.Worker]
	}
	switch f.Kind {
	case NetDelay:
		px.Delay(f.Delay)
		c.timers = append(c.timers, time.AfterFunc(f.For, func() { px.Delay(0) }))
	case NetDrop:
		px.Drop()
	case NetStall:
		px.Stall()
		c.timers = append(c.timers, time.AfterFunc(f.For, px.Resume))
	case NetCut:
		px.CutAfter(f.Bytes)
	case NetCrash:
		c.workers[f.Worker].crash()
	case NetFreeze:
		w := c.workers[f.Worker]
		w.pause(true)
		c.timers = append(c.timers, time.AfterFunc(f.For, func() { w.pause(false) }))
	}
}

// close stops the timers, the nodes and the proxies: the client first, so
// that it ends its sessions. It returns what went wrong stopping the
// client and the workers.
func (c *cluster) close() []string {
	for _, t := range c.timers {
		t.Stop()
	}
	if c.slowStop != nil {
		close(c.slowStop)
		c.slowDone.Wait()
	}
	if c.back != nil {
		c.back.Resume()
	}
	for _, p := range c.proxies {
		p.Resume()
	}
	var bad []string
	if c.client != nil {
		t0 := time.Now()
		_ = c.client.Close()
		if took := time.Since(t0); took > clientStop {
			bad = append(bad, fmt.Sprintf("the client node's Close took %v, over %v", took.Round(time.Millisecond), clientStop))
		}
	}
	for k, w := range c.workers {
		if err := w.close(); err != nil {
			bad = append(bad, fmt.Sprintf("worker %d: %v", k, err))
		}
	}
	for _, p := range c.proxies {
		p.Close()
	}
	if c.back != nil {
		c.back.Close()
	}
	return bad
}
