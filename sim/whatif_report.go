package sim

import (
	"slices"
	"time"
)

// RunReport is one run of a what-if. Times are in the schedule's time:
// under a time scale, measured times divided by it.
type RunReport struct {
	Seed   uint64
	Faults bool // false for the baseline and the reference
	// Elapsed is the time from the pipeline's start to the end of its last
	// pass (or its failure).
	Elapsed time.Duration
	// FirstBatch is the time from the start to the first batch's arrival
	// at a device: building the pipeline (in the order, reading every
	// file's index) and filling it.
	FirstBatch time.Duration
	// Samples and Batches the devices consumed (padding left out);
	// Throughput is Samples per second of Elapsed.
	Samples, Batches int
	Throughput       float64
	Devices          []DeviceReport
	// Injected is what the schedule did; Windows are the fault windows and
	// stalls, for a report to shade.
	Injected Injected
	Windows  []Window
	// Restarts of stage actors; Skipped corrupt records, over all passes;
	// Missing, samples of the reference the run did not consume.
	Restarts int
	Skipped  uint64
	Missing  int
	// PeakLiveBatches is the most batches alive at once in any pass; Bound
	// the most the protocol allows (0: not checked, no batch stage).
	PeakLiveBatches, Bound int
	// Err is the error the run ended with: a fault the policy fails on, or
	// a restart storm, is an outcome, not a broken invariant.
	Err error
	// Violations are the broken invariants: a sample consumed twice or
	// lost, a hang, a leak, live batches past the bound.
	Violations []string
	Series     []Point
	// Stopped says the caller's ctx ended the run (a signal): it says
	// nothing about the invariants.
	Stopped bool
}

// Verdict is Pass, Fail when an invariant broke, or Stopped.
func (r RunReport) Verdict() Verdict {
	if r.Stopped {
		return Stopped
	}
	if len(r.Violations) > 0 {
		return Fail
	}
	return Pass
}

// DeviceReport is one device's figures in a run.
type DeviceReport struct {
	Device  int `json:"device"`
	Batches int `json:"batches"`
	// Busy is the fraction of the run the device spent stepping (slowdowns
	// included, stalls not).
	Busy float64 `json:"busy"`
	// The device's waits for its next batch: from its last step's end (or
	// the pass's start) to the batch's arrival. A stall shows in WaitMax:
	// one long wait per device is below p99 of a few hundred steps.
	WaitP50 time.Duration `json:"wait_p50_ns"`
	WaitP95 time.Duration `json:"wait_p95_ns"`
	WaitP99 time.Duration `json:"wait_p99_ns"`
	WaitMax time.Duration `json:"wait_max_ns"`
}

// Point is a sample of a run's time series.
type Point struct {
	At      time.Duration   // since the run's start
	Samples int             // consumed so far
	Busy    []time.Duration // per device, busy so far
}

// Summary is the medians of runs' figures; a device's waits are the
// medians of its own, and WaitP50/95/99/Max those of the worst device.
type Summary struct {
	Runs int `json:"runs"`
	// Measured counts the runs the figures are the medians of: those that
	// ran to their end. A run that ended in an error or was stopped has
	// no throughput or waits to speak of, and its zeros would drag the
	// medians down.
	Measured   int            `json:"measured"`
	Throughput float64        `json:"throughput"`
	Elapsed    time.Duration  `json:"elapsed_ns"`
	FirstBatch time.Duration  `json:"first_batch_ns"`
	Busy       float64        `json:"busy"` // mean over the devices
	WaitP50    time.Duration  `json:"wait_p50_ns"`
	WaitP95    time.Duration  `json:"wait_p95_ns"`
	WaitP99    time.Duration  `json:"wait_p99_ns"`
	WaitMax    time.Duration  `json:"wait_max_ns"`
	Delay      time.Duration  `json:"injected_delay_ns"`
	Restarts   float64        `json:"restarts"`
	Skipped    float64        `json:"skipped"`
	Devices    []DeviceReport `json:"devices"`
	Failed     int            `json:"failed"` // runs with a broken invariant
	Errors     int            `json:"errors"` // runs that ended in an error
}

// Ratios compare the runs' medians with the baseline's figures: above 1,
// more than the baseline.
type Ratios struct {
	Throughput float64 `json:"throughput"`
	Elapsed    float64 `json:"elapsed"`
	Busy       float64 `json:"busy"`
	WaitP99    float64 `json:"wait_p99"`
	WaitMax    float64 `json:"wait_max"`
}

// Summarize takes the medians of runs.
func Summarize(all []RunReport) Summary {
	s := Summary{Runs: len(all)}
	for _, r := range all {
		if r.Verdict() == Fail {
			s.Failed++
		}
		if r.Err != nil {
			s.Errors++
		}
	}
	var runs []RunReport
	for _, r := range all {
		if r.Err == nil && !r.Stopped {
			runs = append(runs, r)
		}
	}
	s.Measured = len(runs)
	if len(runs) == 0 {
		return s
	}
	pick := func(f func(RunReport) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	s.Throughput = pick(func(r RunReport) float64 { return r.Throughput })
	s.Elapsed = time.Duration(pick(func(r RunReport) float64 { return float64(r.Elapsed) }))
	s.FirstBatch = time.Duration(pick(func(r RunReport) float64 { return float64(r.FirstBatch) }))
	s.Delay = time.Duration(pick(func(r RunReport) float64 { return float64(r.Injected.Delay) }))
	s.Restarts = pick(func(r RunReport) float64 { return float64(r.Restarts) })
	s.Skipped = pick(func(r RunReport) float64 { return float64(r.Skipped) })
	s.Busy = pick(func(r RunReport) float64 {
		sum := 0.0
		for _, d := range r.Devices {
			sum += d.Busy
		}
		return sum / float64(max(len(r.Devices), 1))
	})
	s.Devices = summarizeDevices(runs)
	for _, d := range s.Devices {
		s.WaitP50, s.WaitP95, s.WaitP99 = max(s.WaitP50, d.WaitP50), max(s.WaitP95, d.WaitP95), max(s.WaitP99, d.WaitP99)
		s.WaitMax = max(s.WaitMax, d.WaitMax)
	}
	return s
}

// summarizeDevices takes each device's medians over the runs.
func summarizeDevices(runs []RunReport) []DeviceReport {
	var out []DeviceReport
	for d := range len(runs[0].Devices) {
		col := func(f func(DeviceReport) float64) float64 {
			var xs []float64
			for _, r := range runs {
				if d < len(r.Devices) {
					xs = append(xs, f(r.Devices[d]))
				}
			}
			return median(xs)
		}
		dur := func(f func(DeviceReport) time.Duration) time.Duration {
			return time.Duration(col(func(x DeviceReport) float64 { return float64(f(x)) }))
		}
		out = append(out, DeviceReport{Device: d,
			Batches: int(col(func(x DeviceReport) float64 { return float64(x.Batches) })),
			Busy:    col(func(x DeviceReport) float64 { return x.Busy }),
			WaitP50: dur(func(x DeviceReport) time.Duration { return x.WaitP50 }),
			WaitP95: dur(func(x DeviceReport) time.Duration { return x.WaitP95 }),
			WaitP99: dur(func(x DeviceReport) time.Duration { return x.WaitP99 }),
			WaitMax: dur(func(x DeviceReport) time.Duration { return x.WaitMax })})
	}
	return out
}

// ratios divides the runs' medians by the baseline's.
func ratios(runs, base Summary) *Ratios {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return &Ratios{
		Throughput: div(runs.Throughput, base.Throughput),
		Elapsed:    div(float64(runs.Elapsed), float64(base.Elapsed)),
		Busy:       div(runs.Busy, base.Busy),
		WaitP99:    div(float64(runs.WaitP99), float64(base.WaitP99)),
		WaitMax:    div(float64(runs.WaitMax), float64(base.WaitMax)),
	}
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// quantile is the q-quantile of xs, nearest rank; 0 for none.
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
