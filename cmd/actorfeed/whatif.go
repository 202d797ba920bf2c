package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/supervisor"
)

// whatIfOptions are sim's flags for a user's own program.
type whatIfOptions struct {
	spec, faults string
	runs         int
	baseline     bool
	timeScale    float64
	report       string
	json         string
	onCorrupt    string
	lanes        int
}

// runWhatIf runs the --spec program under the --faults schedule and
// prints each run, the medians and, with --baseline, the ratios.
func runWhatIf(ctx context.Context, out io.Writer, o simOptions) error {
	w := o.whatIf
	if w.runs < 1 || w.runs > maxScenarios || !(w.timeScale > 0 && w.timeScale <= 1) { // NaN is in no range
		return usageError{fmt.Errorf("--runs must be from 1 to %d and --time-scale in (0, 1]", maxScenarios)}
	}
	if err := checkInts(intFlag{"--lanes", w.lanes, 1, actors.MaxConcurrency}); err != nil {
		return usageError{err}
	}
	policy, err := supervisor.ParseCorruptPolicy(w.onCorrupt)
	if err != nil {
		return usageError{fmt.Errorf("--on-corrupt: %w", err)}
	}
	spec, err := parseSpecFile(w.spec)
	if err != nil {
		return err
	}
	var sched *sim.Schedule
	if w.faults != "" {
		if sched, err = readSchedule(w.faults); err != nil {
			return err
		}
	}
	if w.report != "" {
		if err := os.MkdirAll(w.report, 0o755); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	feed := spec.Feed()
	fmt.Fprintf(out, "what-if: %s, reader %q on %d device(s), step %v, %d pass(es); faults: %s\n", w.spec, feed.Reader, feed.N, feed.Step, feed.Passes, describeSchedule(w.faults, sched))
	if w.timeScale != 1 {
		fmt.Fprintf(out, "time scaled by %g: every duration runs %gx faster and is reported unscaled; CPU work is not scaled (docs/simulation.md)\n", w.timeScale, 1/w.timeScale)
	}
	fmt.Fprintf(out, runRow, "run", "seed", "samples/s", "elapsed", "first", "busy", "wait p50", "wait p95", "wait p99", "wait max", "injected", "restarts", "skipped", "verdict", "faults fired")
	wi := sim.WhatIf{Spec: spec, Schedule: sched, Seed: o.seed, Runs: w.runs, Baseline: w.baseline, TimeScale: w.timeScale,
		Deadline: o.deadline, Options: actors.Options{OnCorrupt: policy, Lanes: w.lanes}, Maps: builtinMaps, OnRun: func(r sim.RunReport) { printRun(out, r) }}
	if !o.deadlineSet {
		wi.Deadline = 0 // the what-if's own default
	}
	res, err := wi.Run(ctx)
	if err != nil {
		return err
	}
	if res.Baseline != nil {
		printRun(out, *res.Baseline)
	}
	printSummary(out, res)
	return finishWhatIf(out, w, res)
}

// finishWhatIf writes the report and the JSON, and fails the command
// when a run broke an invariant.
func finishWhatIf(out io.Writer, w whatIfOptions, res *sim.WhatIfResult) error {
	if w.report != "" {
		written, err := drawWhatIf(w.report, res)
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		fmt.Fprintf(out, "report: %s\n", strings.Join(written, ", "))
	}
	if w.json != "" {
		if err := atomicfile.Write(w.json, func(f io.Writer) error { return writeWhatIfJSON(f, res) }); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if res.Median.Failed > 0 {
		return fmt.Errorf("%d of %d runs broke an invariant", res.Median.Failed, res.Median.Runs)
	}
	return nil
}

func readSchedule(path string) (*sim.Schedule, error) {
	f, _, err := format.OpenFile("fault schedule", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, sim.MaxScheduleBytes+1))
	if err != nil {
		return nil, err
	}
	s, err := sim.ParseSchedule(data)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	return s, nil
}

func describeSchedule(path string, s *sim.Schedule) string {
	if s == nil {
		return "none"
	}
	parts := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		parts[i] = f.String()
	}
	return fmt.Sprintf("%s (%s)", path, strings.Join(parts, "; "))
}

// runRow lays out a run's row: fixed widths, so that rows printed as runs
// end line up.
const runRow = "%-8s %6v %10v %9v %9v %5v %9v %9v %9v %9v %9v %8v %8v %-7s %s\n"

// short rounds a duration for a table: milliseconds above a second.
func short(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return round(d)
}

func printRun(w io.Writer, r sim.RunReport) {
	name := "faults"
	if !r.Faults {
		name = "baseline"
	}
	s := sim.Summarize([]sim.RunReport{r})
	verdict := string(r.Verdict())
	if r.Err != nil && r.Verdict() == sim.Pass {
		verdict = "pass*"
	}
	if r.Stopped {
		fmt.Fprintf(w, "%-8s %6v stopped after %v\n", name, r.Seed, short(r.Elapsed))
		return
	}
	fmt.Fprintf(w, runRow, name, r.Seed, fmt.Sprintf("%.0f", r.Throughput), short(r.Elapsed), short(r.FirstBatch), fmt.Sprintf("%.0f%%", 100*s.Busy),
		short(s.WaitP50), short(s.WaitP95), short(s.WaitP99), short(s.WaitMax), short(r.Injected.Delay), r.Restarts, r.Skipped, verdict, firedList(r.Injected.ByKind))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
	if r.Err != nil {
		fmt.Fprintf(w, "  error: %v\n", r.Err)
	}
}

// printSummary prints the medians, each device's, and the ratios.
func printSummary(out io.Writer, res *sim.WhatIfResult) {
	m := res.Median
	switch {
	case m.Measured == 0:
		fmt.Fprintf(out, "\nno medians: none of %d run(s) ran to its end\n", m.Runs)
	default:
		of := ""
		if m.Measured < m.Runs {
			of = fmt.Sprintf(" (of %d; those that ended in an error or were stopped are left out)", m.Runs)
		}
		fmt.Fprintf(out, "\nmedians of %d run(s)%s: %.0f samples/s, elapsed %v, first batch %v, devices busy %.0f%%, data wait p50 %v p95 %v p99 %v max %v (worst device), injected delay %v, restarts %g, skipped %g\n",
			m.Measured, of, m.Throughput, short(m.Elapsed), short(m.FirstBatch), 100*m.Busy, short(m.WaitP50), short(m.WaitP95), short(m.WaitP99), short(m.WaitMax), short(m.Delay), m.Restarts, m.Skipped)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "device\tbatches\tbusy\twait p50\twait p95\twait p99\twait max\t")
		for _, d := range m.Devices {
			fmt.Fprintf(tw, "%d\t%d\t%.0f%%\t%v\t%v\t%v\t%v\t\n", d.Device, d.Batches, 100*d.Busy, short(d.WaitP50), short(d.WaitP95), short(d.WaitP99), short(d.WaitMax))
		}
		tw.Flush()
	}
	if r := res.Ratios; r != nil {
		fmt.Fprintf(out, "with faults / baseline: throughput %.2f, elapsed %.2f, busy %.2f, data wait p99 %.2f, max %.2f\n", r.Throughput, r.Elapsed, r.Busy, r.WaitP99, r.WaitMax)
	}
	fmt.Fprintf(out, "invariants (exactly once, no hang, no leak, bounded memory): %d of %d run(s) pass", m.Runs-m.Failed, m.Runs)
	if m.Errors > 0 {
		fmt.Fprintf(out, "; %d ended in an error (pass*: the error its faults made due)", m.Errors)
	}
	fmt.Fprintln(out)
}

// whatIfJSON is --json's document.
type whatIfJSON struct {
	Runs     []runJSON   `json:"runs"`
	Baseline *runJSON    `json:"baseline,omitempty"`
	Median   sim.Summary `json:"median"`
	Ratios   *sim.Ratios `json:"ratios,omitempty"`
}

type runJSON struct {
	Seed       uint64         `json:"seed"`
	Throughput float64        `json:"throughput"`
	ElapsedS   float64        `json:"elapsed_s"`
	Summary    sim.Summary    `json:"summary"`
	Fired      map[string]int `json:"fired"`
	Restarts   int            `json:"restarts"`
	Skipped    uint64         `json:"skipped"`
	Missing    int            `json:"missing"`
	Verdict    string         `json:"verdict"`
	Error      string         `json:"error,omitempty"`
	Violations []string       `json:"violations,omitempty"`
}

func toJSON(r sim.RunReport) runJSON {
	j := runJSON{Seed: r.Seed, Throughput: r.Throughput, ElapsedS: r.Elapsed.Seconds(), Summary: sim.Summarize([]sim.RunReport{r}),
		Fired: map[string]int{}, Restarts: r.Restarts, Skipped: r.Skipped, Missing: r.Missing, Verdict: string(r.Verdict()),
		Violations: r.Violations}
	for k, v := range r.Injected.ByKind {
		j.Fired[string(k)] = v
	}
	if r.Err != nil {
		j.Error = r.Err.Error()
	}
	return j
}

func writeWhatIfJSON(w io.Writer, res *sim.WhatIfResult) error {
	doc := whatIfJSON{Median: res.Median, Ratios: res.Ratios}
	for _, r := range res.Runs {
		doc.Runs = append(doc.Runs, toJSON(r))
	}
	if res.Baseline != nil {
		b := toJSON(*res.Baseline)
		doc.Baseline = &b
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
