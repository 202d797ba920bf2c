package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/netsim"
)

// runNetSim runs the network scenarios (sim --network): a data service's
// workers behind fault-injecting proxies, each scenario checked against the
// same pipeline in one process. It prints every failure in full, and a
// line at the end.
func runNetSim(ctx context.Context, out io.Writer, o simOptions) error {
	var scenarios []netsim.Scenario
	if o.replaySet {
		seed, err := strconv.ParseUint(o.replay, 10, 64)
		if err != nil {
			return usageError{fmt.Errorf("--replay %q: a network scenario is replayed by its seed", o.replay)}
		}
		scenarios = append(scenarios, netsim.Generate(seed))
	} else {
		// First a trainer that misbehaves towards the workers beside a
		// well-behaved one, then the drawn scenarios.
		scenarios = append(scenarios, netsim.Hostile(o.seed))
		for k := range o.scenarios {
			scenarios = append(scenarios, netsim.Generate(o.seed+uint64(k)))
		}
	}
	cfg, where, err := netWorkers(o.inProcess)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%d network scenarios", len(scenarios))
	if !o.replaySet {
		what += fmt.Sprintf(" (a hostile trainer beside a well-behaved one, then %d drawn)", o.scenarios)
	}
	fmt.Fprintf(out, "running %s, %d at a time, workers %s\n", what, o.parallel, where)
	before := goleak.IgnoreCurrent()
	start := time.Now()
	results, wait := runNetScenarios(ctx, scenarios, cfg, o.parallel)
	failed, lost, batches := 0, int64(0), 0
	var slowest netsim.Result
	for i := range scenarios {
		res, ok := <-results[i]
		if !ok || res.Verdict == sim.Stopped {
			wait()
			fmt.Fprintf(out, "%v after %d of %d scenarios: %d failed\n", context.Cause(ctx), i, len(scenarios), failed)
			return context.Cause(ctx)
		}
		lost, batches = lost+res.Lost, batches+res.Batches
		if res.Duration > slowest.Duration {
			slowest = res
		}
		if res.Verdict != sim.Pass || o.replaySet {
			if res.Verdict != sim.Pass {
				failed++
			}
			fmt.Fprintf(out, "%s %s in %v, %d batches, %d workers lost\n  %s\n", res.Verdict, "net", res.Duration.Round(time.Millisecond),
				res.Batches, res.Lost, res.Scenario.Describe())
			for _, v := range res.Violations {
				fmt.Fprintf(out, "  violation: %s\n", v)
			}
		}
		if (i+1)%100 == 0 {
			fmt.Fprintf(out, "... %d of %d, %d failed, %v\n", i+1, len(scenarios), failed, time.Since(start).Round(time.Second))
		}
	}
	wait()
	// The pinned protoactor-go never closes a gRPC connection whose first
	// stream failed (a message sent to a worker that just crashed): with
	// the nodes' idle timeout it stops reconnecting, but its goroutines
	// stay (service.RemoteLeaks). Their serializers are counted, not
	// failed; any other goroutine fails.
	if err := leakcheck.Find(before); err != nil {
		failed++
		fmt.Fprintf(out, "violation: goroutines left after the last scenario: %v\n", err)
	}
	fmt.Fprintf(out, "%d network scenarios in %v: %d passed, %d failed; %d batches, workers lost %d times; the slowest, net-%d, took %v (start %v, run %v, stop %v); %d goroutines of idle gRPC connections the remote left\n",
		len(scenarios), time.Since(start).Round(time.Millisecond), len(scenarios)-failed, failed, batches, lost, slowest.Scenario.Seed,
		slowest.Duration.Round(time.Millisecond), slowest.Start.Round(time.Millisecond), slowest.Run.Round(time.Millisecond),
		slowest.Stop.Round(time.Millisecond), countGoroutines(service.RemoteLeaks[0]))
	if failed > 0 {
		return fmt.Errorf("%d network scenario(s) failed", failed)
	}
	return nil
}

// netWorkers is how the scenarios start their workers: as actorfeed serve
// processes (this executable), which check for leaks when they stop, or
// in this process.
func netWorkers(inProcess bool) (netsim.Config, string, error) {
	if inProcess {
		return netsim.Config{}, "in this process", nil
	}
	self, err := os.Executable()
	if err != nil {
		return netsim.Config{}, "", fmt.Errorf("finding this executable to start workers: %w", err)
	}
	return netsim.Config{WorkerCommand: []string{self, "serve", "--keepalive", "1s", "--threads", "2", "--progress-every", "1h", "--check-leaks"}},
		"in processes", nil
}

// runNetScenarios runs the scenarios, parallel at a time; each result
// comes on its channel, closed unsent once ctx ended. wait waits for them.
func runNetScenarios(ctx context.Context, scenarios []netsim.Scenario, cfg netsim.Config, parallel int) (results []chan netsim.Result, wait func()) {
	results = make([]chan netsim.Result, len(scenarios))
	for i := range results {
		results[i] = make(chan netsim.Result, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() == nil {
					results[i] <- netsim.Run(ctx, scenarios[i], cfg)
				}
				close(results[i])
			}
		})
	}
	go func() {
		defer close(next)
		for i := range scenarios {
			select {
			case next <- i:
			case <-ctx.Done():
				for _, r := range results[i:] { // never given out
					close(r)
				}
				return
			}
		}
	}()
	return results, wg.Wait
}

// countGoroutines counts the goroutines whose stack names fn.
func countGoroutines(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
