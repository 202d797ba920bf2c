package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/scenario"
)

type simOptions struct {
	scenarios   int
	seed        uint64
	replay      string // a seed or a regression's name
	replaySet   bool
	regressions bool
	deadline    time.Duration
	show        string
	parallel    int
	preempt     bool
	network     bool
	objects     bool // object-store scenarios (sim/objsim)
	inProcess   bool // --network's workers as nodes in this process
	deadlineSet bool
	whatIf      whatIfOptions
}

// maxParallel bounds --parallel: scenarios beyond a few per core only
// contend, and each holds a pipeline's memory.
const maxParallel = 256

// maxScenarios bounds --scenarios: a run lists its scenarios before it
// starts, about 1 KB each (a million took 1 GB).
const maxScenarios = 100_000

// simHelp is the sim command's long help.
const simHelp = `Runs N random scenarios (seeds S, S+1, ...), each a pipeline shape and a fault
schedule drawn from its seed, plus the named regression scenarios, and checks
every invariant of docs/reliability.md: each sample exactly once per pass (or
exactly the damaged ones missing and counted, under the skip policy), the
fault-free order (unless --any-order is drawn), an error naming the stage and cause
when one is due and before the deadline, live batches within the bound, no
goroutine and no actor left. It prints a table, the seeds of failures, and
exits non-zero on any violation.

The table's columns: the scenario (its seed, or a regression's name);
restarts of stage actors; corrupt records skipped; samples the devices
consumed; the time taken; the verdict ("pass*" when the run ended in the
error its damaged files or a restart storm called for); the faults
that fired, by kind ("-" when none did): read-error (a read fails),
read-error-p (reads fail with a probability), short-read (a read returns
half its bytes), stall-read (a read blocks), panic and panic-storm (a stage
crashes once, or many times in a row), panic-device and stall-device (a
device crashes, or stalls). A failed or replayed scenario also shows its
shape, its fault schedule, its error and each violation. --replay SEED (or the name of a regression,
such as panic-storm) runs that scenario again and shows its schedule and
verdict. --parallel N runs N scenarios at a time: the
machine is then loaded, which reaches races that a scenario alone on an idle
machine cannot; goroutine leaks are then checked once, after the last,
and traced to the scenarios that started them.

--preempt makes every scenario a job that is preempted and resumed: its
ranks stop (or are killed, and resume from their last checkpoint) at drawn
batches, perhaps several times an epoch, and go on from their states as
another number of ranks, readers and devices, with the faults still
injected. It checks every epoch's samples exactly once across the ranks,
equal batch counts, and each batch against the uninterrupted run of its
world (docs/determinism.md).

--network runs data-service scenarios instead (docs/distributed.md): 2 or 3
workers (actorfeed serve processes; --workers-in-process: nodes in this
one) and the client, each behind a fault-injecting TCP proxy, and network
faults struck as the consumer takes batches: delays, dropped connections,
stalls that hold connections open (past the lease, the worker is taken for
lost, fenced, and comes back), connections cut part way through a message,
crashed workers (SIGKILL), slow and frozen workers (SIGSTOP, SIGCONT). Each
scenario's batches must be those of the same pipeline in one process, in
the order, each once, with no hang, the service stage within its credit
bound, every worker stopped cleanly with no goroutine left, and none left
here at the end. --replay SEED shows one in full.

--spec PIPELINE.yaml runs your own program (docs/programs.md) on its own
files instead, under the fault schedule --faults FAULTS.yaml
(docs/simulation.md), --runs times with seeds --seed, --seed+1, ...; it
prints each run and the medians: throughput, time to the first batch, each
device's busy fraction and data-wait p50/p95/p99/max, the delay injected,
restarts, skipped records, the faults fired and the invariant verdict (exactly once, no hang, no leak, bounded memory).
--baseline also runs the program without faults and prints the ratios;
--report DIR draws every run; --time-scale 0.1 runs a schedule of
latencies and stalls ten times faster than real time.`

func newSim() *cobra.Command {
	o := simOptions{}
	cmd := &cobra.Command{
		Use:   "sim [--scenarios N] [--seed S] [--replay SEED] | sim --spec PIPELINE.yaml --faults FAULTS.yaml [--runs N] [--baseline]",
		Short: "Run fault-injection scenarios and check the runtime's invariants",
		Long:  simHelp,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.flags(cmd.Flags())
	return cmd
}

// run checks the flags and runs what they ask for.
func (o *simOptions) run(cmd *cobra.Command) error {
	o.replaySet = cmd.Flags().Changed("replay")
	o.deadlineSet = cmd.Flags().Changed("deadline")
	if o.whatIf.spec != "" {
		for _, name := range []string{"scenarios", "replay", "preempt", "parallel", "show", "regressions"} {
			if cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s is for generated scenarios, not --spec", name)}
			}
		}
		return runWhatIf(cmd.Context(), cmd.OutOrStdout(), *o)
	}
	if o.whatIf.faults != "" {
		return usageError{fmt.Errorf("--faults needs --spec: the program to run under the schedule")}
	}
	if o.scenarios > maxScenarios {
		return usageError{fmt.Errorf("--scenarios %d is more than %d in one run: run more with other --seed values", o.scenarios, maxScenarios)}
	}
	if o.parallel > maxParallel {
		return usageError{fmt.Errorf("--parallel %d is more than %d: each scenario runs a pipeline of its own", o.parallel, maxParallel)}
	}
	if o.scenarios < 0 || o.deadline <= 0 || o.parallel < 1 || (o.show != "" && o.show != "all" && o.show != "fail") {
		return usageError{fmt.Errorf("--scenarios must not be negative, --deadline and --parallel must be positive, --show is all or fail")}
	}
	if o.objects {
		if o.preempt || o.network {
			return usageError{fmt.Errorf("--object-store excludes --preempt and --network")}
		}
		return runObjSim(cmd.Context(), cmd.OutOrStdout(), *o)
	}
	if o.network {
		if o.preempt {
			return usageError{fmt.Errorf("--network and --preempt exclude each other")}
		}
		return runNetSim(cmd.Context(), cmd.OutOrStdout(), *o)
	}
	if o.inProcess {
		return usageError{fmt.Errorf("--workers-in-process is for --network")}
	}
	return runSim(cmd.Context(), cmd.OutOrStdout(), *o)
}

// flags registers the command's flags on o.
func (o *simOptions) flags(f *pflag.FlagSet) {
	f.IntVar(&o.scenarios, "scenarios", 100, "random scenarios to run")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the first scenario")
	f.StringVar(&o.replay, "replay", "", "run only this seed's scenario, or the regression of this name, in full")
	f.BoolVar(&o.regressions, "regressions", true, "also run the named regression scenarios")
	f.DurationVar(&o.deadline, "deadline", 20*time.Second, "deadline of one scenario")
	f.StringVar(&o.show, "show", "", "rows of the table: all or fail (default all up to 100 scenarios)")
	f.BoolVar(&o.preempt, "preempt", false, "preempt and resume every scenario's job, as ranks of a trainer")
	f.BoolVar(&o.network, "network", false, "run data-service scenarios instead: workers behind fault-injecting proxies (docs/distributed.md)")
	f.BoolVar(&o.objects, "object-store", false, "run object-store scenarios instead: s3:// reads through throttling, errors and cut bodies (docs/storage.md; needs versitygw)")
	f.BoolVar(&o.inProcess, "workers-in-process", false, "--network: run the workers as nodes in this process, not as actorfeed serve processes")
	f.IntVar(&o.parallel, "parallel", 1, "scenarios run at a time")
	f.StringVar(&o.whatIf.spec, "spec", "", "run this YAML program (docs/programs.md) under --faults instead of generated scenarios")
	f.StringVar(&o.whatIf.faults, "faults", "", "the fault schedule (YAML, docs/simulation.md) for --spec")
	f.IntVar(&o.whatIf.runs, "runs", 3, "with --spec: runs, with seeds --seed, --seed+1, ...")
	f.BoolVar(&o.whatIf.baseline, "baseline", false, "with --spec: also run the program without faults and print the ratios")
	f.Float64Var(&o.whatIf.timeScale, "time-scale", 1, "with --spec: multiply every duration by this factor (0.1: ten times faster); latency-shaped faults only")
	f.StringVar(&o.whatIf.report, "report", "", "with --spec: draw each run into this directory")
	f.StringVar(&o.whatIf.onCorrupt, "on-corrupt", "fail", "with --spec: what a corrupt record does: fail or skip")
	f.IntVar(&o.whatIf.lanes, "lanes", 1, "with --spec: run the program's pipeline in this many lanes (actors.Options.Lanes)")
	f.StringVar(&o.whatIf.json, "json", "", "with --spec: write the runs, medians and ratios as JSON to this file")
}

func runSim(ctx context.Context, out io.Writer, o simOptions) error {
	scenarios, err := simScenarios(o)
	if err != nil {
		return usageError{err}
	}
	show, rows := o.show, ""
	if show == "" {
		show = "all"
		if len(scenarios) > 100 {
			show, rows = "fail", " (over 100: the table shows failed ones only; --show all lists every one)"
		}
	}
	fmt.Fprintf(out, "running %d scenarios, %d at a time%s\n", len(scenarios), o.parallel, rows)
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0) // one space between columns: rows fit 100 columns
	fmt.Fprintln(tw, "scenario\trestarts\tskipped\tsamples\ttime\tverdict\tfaults fired")
	var failed []string
	erred := 0 // rows marked pass*
	start := time.Now()
	fired := map[sim.FaultKind]int{}
	before := goleak.IgnoreCurrent() // the command's own goroutines
	results := runScenarios(ctx, scenarios, o)
	for i, sc := range scenarios {
		res, ok := <-results[i]
		if !ok || res.Verdict == sim.Stopped {
			tw.Flush()
			fmt.Fprintf(out, "\n%v after %d of %d scenarios in %v: %d passed, %d failed\n", context.Cause(ctx), i, len(scenarios),
				time.Since(start).Round(time.Millisecond), i-len(failed), len(failed))
			return context.Cause(ctx)
		}
		for k, v := range res.Fired {
			fired[k] += v
		}
		if res.Verdict == sim.Pass && res.Err != nil && show == "all" {
			erred++
		}
		if res.Verdict != sim.Pass {
			failed = append(failed, scenarioName(sc))
		}
		printScenario(out, tw, sc, res, show == "all", o.replaySet)
		if show == "fail" && (i+1)%500 == 0 {
			tw.Flush()
			fmt.Fprintf(out, "... %d of %d scenarios, %d failed, %v\n", i+1, len(scenarios), len(failed), time.Since(start).Round(time.Second))
		}
	}
	tw.Flush()
	if erred > 0 {
		fmt.Fprintln(out, "pass*: the run ended in the error that its faults made due")
	}
	if o.parallel > 1 { // each scenario's own check would have seen the others' goroutines
		failed = leftGoroutines(out, before, failed)
	}
	fmt.Fprintf(out, "\n%d scenarios in %v: %d passed, %d failed\nfaults fired:\n%s\n", len(scenarios),
		time.Since(start).Round(time.Millisecond), len(scenarios)-len(failed), len(failed), wrapList(firedList(fired), 96))
	if len(failed) > 0 {
		fmt.Fprintf(out, "replay a failure with: actorfeed sim --replay SEED or NAME (%s)\n", strings.Join(failed, ", "))
		return fmt.Errorf("%d of %d scenarios violated an invariant: %s", len(failed), len(scenarios), strings.Join(head(failed, 10), ", "))
	}
	return nil
}

// simScenarios are the scenarios o asks for: the replayed one, or the
// regressions and o.scenarios generated ones.
func simScenarios(o simOptions) ([]scenario.Scenario, error) {
	if o.replaySet {
		sc, err := replayed(o.replay, o.preempt)
		if err != nil {
			return nil, err
		}
		return []scenario.Scenario{sc}, nil
	}
	var scenarios []scenario.Scenario
	generate := scenario.Generate
	if o.preempt {
		generate = scenario.GeneratePreemption
	}
	switch {
	case o.regressions && o.preempt:
		scenarios = append(scenarios, scenario.PreemptRegressions()...)
	case o.regressions:
		scenarios = append(scenarios, scenario.Regressions()...)
	}
	for k := range o.scenarios {
		scenarios = append(scenarios, generate(o.seed+uint64(k)))
	}
	return scenarios, nil
}

// printScenario writes a scenario's row (every row with all, a failed one
// otherwise), and under it, for a failed or replayed one, its shape,
// schedule, error and violations.
func printScenario(out io.Writer, tw *tabwriter.Writer, sc scenario.Scenario, res scenario.Result, all, replayed bool) {
	if all || res.Verdict != sim.Pass {
		// A long list of faults goes on under itself, so rows fit 100 columns.
		lines := strings.Split(wrapList(firedList(res.Fired), 32), "\n")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%s\t%s\n", scenarioName(sc), res.Restarts, res.Skipped, res.Samples,
			res.Duration.Round(time.Millisecond), verdict(res), strings.TrimSpace(lines[0]))
		for _, more := range lines[1:] {
			fmt.Fprintf(tw, "\t\t\t\t\t\t%s\n", strings.TrimSpace(more))
		}
	}
	if replayed || res.Verdict != sim.Pass {
		tw.Flush()
		fmt.Fprintf(out, "  shape: %s\n", sc.Describe())
		fmt.Fprintf(out, "  schedule: %s\n", sc.DescribeFaults())
		if res.Err != nil {
			fmt.Fprintf(out, "  error: %v\n", res.Err)
		}
		for _, v := range res.Violations {
			fmt.Fprintf(out, "  violation: %s\n", v)
		}
	}
}

// leftGoroutines checks, after scenarios ran side by side, that none left
// a goroutine: the scenarios that started one fail (goroutines no scenario
// started count as one failure more). It returns failed with them.
func leftGoroutines(out io.Writer, before goleak.Option, failed []string) []string {
	err := goleak.Find(before)
	if err == nil {
		return failed
	}
	by := startedBy()
	if len(by) == 0 {
		failed = append(failed, "goroutines left after the last scenario")
	}
	for _, name := range by {
		if !slices.Contains(failed, name) {
			failed = append(failed, name)
		}
	}
	fmt.Fprintf(out, "violation: goroutines left after the last scenario, started by %s: %v\n",
		cmp.Or(strings.Join(by, ", "), "no scenario"), err)
	return failed
}

// runScenarios runs the scenarios, o.parallel at a time, and returns one
// channel per scenario that yields its result (closed without one when ctx
// ended first).
func runScenarios(ctx context.Context, scenarios []scenario.Scenario, o simOptions) []chan scenario.Result {
	results := make([]chan scenario.Result, len(scenarios))
	for i := range results {
		results[i] = make(chan scenario.Result, 1)
	}
	opts := scenario.Options{Deadline: o.deadline, NoLeakCheck: o.parallel > 1}
	next := make(chan int)
	var wg sync.WaitGroup
	for range o.parallel {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() == nil {
					// Goroutines inherit the label, so a leak checked once
					// at the end still names its scenario (startedBy).
					pprof.Do(ctx, pprof.Labels(scenarioLabel, scenarioName(scenarios[i])), func(ctx context.Context) {
						results[i] <- scenario.Run(ctx, scenarios[i], opts)
					})
				}
				close(results[i])
			}
		})
	}
	go func() {
		defer wg.Wait()
		defer close(next)
		for i := range scenarios {
			next <- i
		}
	}()
	return results
}

// scenarioName is how the table, the replay line and the leak check name a
// scenario: a regression by its name, a random one by its seed.
func scenarioName(sc scenario.Scenario) string {
	if sc.Name != "" {
		return sc.Name
	}
	return fmt.Sprintf("seed %d", sc.Seed)
}

// verdict is a row's verdict: a pass whose run ended in the error its
// faults made due is marked (the table's legend says so), so that
// "samples 0, pass" reads right.
func verdict(res scenario.Result) string {
	if res.Verdict == sim.Pass && res.Err != nil {
		return "pass*"
	}
	return string(res.Verdict)
}

// replayed is the scenario --replay names: a seed, or a regression's name.
func replayed(what string, preempt bool) (scenario.Scenario, error) {
	if seed, err := strconv.ParseUint(strings.TrimPrefix(what, "seed "), 10, 64); err == nil {
		if preempt {
			return scenario.GeneratePreemption(seed), nil
		}
		return scenario.Generate(seed), nil
	}
	var names []string
	for _, sc := range append(scenario.Regressions(), scenario.PreemptRegressions()...) {
		if sc.Name == what {
			return sc, nil
		}
		names = append(names, sc.Name)
	}
	return scenario.Scenario{}, fmt.Errorf("--replay %q is neither a seed nor a regression (%s)", what, strings.Join(names, ", "))
}

// scenarioLabel is the profiler label runScenarios runs each scenario
// under.
const scenarioLabel = "sim-scenario"

// startedBy names the scenarios that live goroutines were started by,
// from the labels in the goroutine profile.
func startedBy() []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil
	}
	seen := map[string]bool{}
	for line := range strings.Lines(buf.String()) {
		labels, ok := strings.CutPrefix(strings.TrimSpace(line), "# labels: ")
		if !ok {
			continue
		}
		var m map[string]string
		if json.Unmarshal([]byte(labels), &m) == nil && m[scenarioLabel] != "" {
			seen[m[scenarioLabel]] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func firedList(m map[sim.FaultKind]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// wrapList breaks a comma-separated list into indented lines of at most
// width characters.
func wrapList(list string, width int) string {
	var b strings.Builder
	line := "  "
	for i, part := range strings.Split(list, ",") {
		if i > 0 {
			part = "," + part
		}
		if len(line)+len(part) > width && strings.TrimSpace(line) != "" {
			b.WriteString(line + ",\n")
			line = "  " + strings.TrimPrefix(part, ",")
			continue
		}
		line += part
	}
	b.WriteString(line)
	return b.String()
}

func head(xs []string, n int) []string {
	if len(xs) > n {
		return append(xs[:n:n], fmt.Sprintf("... %d more", len(xs)-n))
	}
	return xs
}
