package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Dist is a distribution of durations that a fault draws latencies from:
// exactly one of Fixed, Uniform, LogNormal or Empirical is set.
type Dist struct {
	Fixed time.Duration
	// Uniform draws evenly from [Uniform[0], Uniform[1]].
	Uniform *[2]time.Duration
	// LogNormal is a log-normal distribution given by its median and its
	// 99th percentile, the two figures storage dashboards show.
	LogNormal *LogNormal
	// Empirical draws one of its samples, each as likely: a latency
	// histogram measured on the user's own storage, listed.
	Empirical []time.Duration
}

// LogNormal is a log-normal distribution by its median and 99th
// percentile (P99 >= Median > 0). Draws are capped at MaxTail x P99, so
// that one draw from the far tail cannot stall a simulation for hours.
type LogNormal struct {
	Median, P99 time.Duration
}

// MaxTail caps log-normal draws at MaxTail x P99. Above that the
// distribution's probability is below 1e-9 for any tail a storage system
// shows (sigma <= 2.5), so the cap changes no figure a run can measure.
const MaxTail = 10

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// Draw draws a duration with r.
func (d Dist) Draw(r *rand.Rand) time.Duration {
	switch {
	case d.Uniform != nil:
		lo, hi := d.Uniform[0], d.Uniform[1]
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	case d.LogNormal != nil:
		mu := math.Log(float64(d.LogNormal.Median))
		sigma := (math.Log(float64(d.LogNormal.P99)) - mu) / z99
		v := math.Exp(mu + sigma*r.NormFloat64())
		return time.Duration(min(v, MaxTail*float64(d.LogNormal.P99)))
	case len(d.Empirical) > 0:
		return d.Empirical[r.IntN(len(d.Empirical))]
	}
	return d.Fixed
}

// Scaled is d with every duration multiplied by f.
func (d Dist) Scaled(f float64) Dist {
	s := func(x time.Duration) time.Duration { return time.Duration(float64(x) * f) }
	out := Dist{Fixed: s(d.Fixed)}
	if d.Uniform != nil {
		out.Uniform = &[2]time.Duration{s(d.Uniform[0]), s(d.Uniform[1])}
	}
	if d.LogNormal != nil {
		out.LogNormal = &LogNormal{Median: s(d.LogNormal.Median), P99: s(d.LogNormal.P99)}
	}
	for _, x := range d.Empirical {
		out.Empirical = append(out.Empirical, s(x))
	}
	return out
}

// check says what is wrong with d, if anything.
func (d Dist) check() error {
	set := 0
	if d.Fixed != 0 {
		set++
	}
	for _, b := range []bool{d.Uniform != nil, d.LogNormal != nil, len(d.Empirical) > 0} {
		if b {
			set++
		}
	}
	switch {
	case set != 1:
		return fmt.Errorf("want exactly one of fixed, uniform, lognormal and empirical")
	case d.Fixed < 0:
		return fmt.Errorf("fixed: want a duration >= 0, got %v", d.Fixed)
	case d.Uniform != nil && (d.Uniform[0] < 0 || d.Uniform[1] < d.Uniform[0]):
		return fmt.Errorf("uniform: want [low, high] with 0 <= low <= high, got %v", *d.Uniform)
	case d.LogNormal != nil && (d.LogNormal.Median <= 0 || d.LogNormal.P99 < d.LogNormal.Median):
		return fmt.Errorf("lognormal: want 0 < median <= p99, got median %v and p99 %v", d.LogNormal.Median, d.LogNormal.P99)
	case slices.ContainsFunc(d.Empirical, func(x time.Duration) bool { return x < 0 }):
		return fmt.Errorf("empirical: want durations >= 0")
	case slices.ContainsFunc(d.durations(), func(x time.Duration) bool { return x > MaxStall }):
		return fmt.Errorf("want latencies up to %v", MaxStall)
	}
	return nil
}

// durations lists every duration d holds.
func (d Dist) durations() []time.Duration {
	out := append([]time.Duration{d.Fixed}, d.Empirical...)
	if d.Uniform != nil {
		out = append(out, d.Uniform[0], d.Uniform[1])
	}
	if d.LogNormal != nil {
		out = append(out, d.LogNormal.Median, d.LogNormal.P99)
	}
	return out
}

func (d Dist) String() string {
	switch {
	case d.Uniform != nil:
		return fmt.Sprintf("uniform %v-%v", d.Uniform[0], d.Uniform[1])
	case d.LogNormal != nil:
		return fmt.Sprintf("lognormal median %v p99 %v", d.LogNormal.Median, d.LogNormal.P99)
	case len(d.Empirical) > 0:
		parts := make([]string, 0, 4)
		for i, x := range d.Empirical {
			if i == 3 {
				parts = append(parts, fmt.Sprintf("... %d in all", len(d.Empirical)))
				break
			}
			parts = append(parts, x.String())
		}
		return "empirical " + strings.Join(parts, ", ")
	}
	return d.Fixed.String()
}
