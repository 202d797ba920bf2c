package sim

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/actorfeed/actorfeed/actors"
)

// FlipBytes is the fault kind a schedule adds to those of generated
// scenarios.
const (
	FlipBytes FaultKind = "flip-bytes" // a byte of a read's data is flipped in flight (the file is untouched)
)

// ErrBadSchedule is wrapped by every error ParseSchedule and Schedule.Check
// return: a fault schedule that does not parse or does not make sense.
var ErrBadSchedule = errors.New("sim: bad fault schedule")

// Limits of a schedule: a file is read whole, and each fault's lists are
// kept in memory.
const (
	MaxScheduleBytes = 1 << 20
	MaxFaults        = 1024
	MaxListLen       = 100_000          // times of stalls, samples of an empirical distribution
	MaxStall         = time.Hour        // a stall's length, and any latency a distribution draws
	MaxTime          = 1000 * time.Hour // a window's ends, the times stalls begin
	MaxRate          = 1000.0           // stalls per second
	maxCount         = 1 << 40          // at, count
	maxBytes         = int64(1) << 50   // bytes cut by a truncation
)

// Schedule is a fault schedule: faults by target and kind, each with the
// window of time in which it applies (docs/simulation.md). Parse one from
// YAML with ParseSchedule, or build it in Go.
type Schedule struct {
	Faults []FaultSpec
}

// FaultSpec is one fault of a schedule. Which fields a kind takes is in
// docs/simulation.md; Check says when a field is missing or foreign.
type FaultSpec struct {
	Kind FaultKind
	// Line is where the fault is in its schedule file (0 when built in Go):
	// errors about it name it.
	Line int

	// Targets. Files is a glob (path/filepath.Match) matched against a
	// file's path and its base name; empty is every file. Stage is a stage
	// kind (actors.KindShuffle, ...). Devices are device numbers; empty is
	// every device.
	Files   string
	Stage   string
	Devices []int

	// When. From and Until bound the window, since the run's start (Until 0:
	// to the end). At is the At-th read, message or step of each target
	// within the window; P a probability per read, message or step. Times
	// and Rate (per second, Poisson arrivals) start stalls.
	From, Until time.Duration
	At          int
	P           float64
	Times       []time.Duration
	Rate        float64

	// What. Dist is a latency (latency, slow-device); Factor multiplies a
	// device's step time (slow-device); Length is a stall's (0 for a
	// stall-read at a read: until the read is abandoned); Count is how many
	// messages in a row panic from the At-th; Bytes is what a truncation
	// cuts from a file's end.
	Dist   *Dist
	Factor float64
	Length time.Duration
	Count  int
	Bytes  int64
}

func (f FaultSpec) String() string {
	parts := []string{string(f.Kind)}
	switch {
	case f.Files != "":
		parts = append(parts, "files "+f.Files)
	case f.Stage != "":
		parts = append(parts, "stage "+f.Stage)
	case len(f.Devices) > 0:
		parts = append(parts, fmt.Sprintf("devices %v", f.Devices))
	}
	if f.At > 0 {
		parts = append(parts, fmt.Sprintf("at %d", f.At))
	}
	if f.P > 0 {
		parts = append(parts, fmt.Sprintf("p %g", f.P))
	}
	if f.Dist != nil {
		parts = append(parts, f.Dist.String())
	}
	if f.Factor > 0 {
		parts = append(parts, fmt.Sprintf("x%g", f.Factor))
	}
	if f.Length > 0 {
		parts = append(parts, "for "+f.Length.String())
	}
	if len(f.Times) > 0 {
		parts = append(parts, fmt.Sprintf("at %v", f.Times))
	}
	if f.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%g/s", f.Rate))
	}
	if f.From > 0 || f.Until > 0 {
		parts = append(parts, fmt.Sprintf("window %v-%v", f.From, untilString(f.Until)))
	}
	return strings.Join(parts, " ")
}

func untilString(d time.Duration) string {
	if d == 0 {
		return "end"
	}
	return d.String()
}

// ScheduleError is a schedule that does not parse or does not make sense:
// it names the line, the fault (from 1) and its kind when it can.
type ScheduleError struct {
	Line  int
	Fault int // 0 when the error is not about one fault
	Kind  FaultKind
	Msg   string
}

func (e *ScheduleError) Error() string {
	where := "sim: fault schedule"
	if e.Line > 0 {
		where += fmt.Sprintf(", line %d", e.Line)
	}
	if e.Fault > 0 {
		where += fmt.Sprintf(": fault %d", e.Fault)
		if e.Kind != "" {
			where += fmt.Sprintf(" (%s)", e.Kind)
		}
	}
	return where + ": " + e.Msg
}

func (e *ScheduleError) Unwrap() error { return ErrBadSchedule }

// kindFields are the fields each kind takes besides kind, from and until.
var kindFields = map[FaultKind][]string{
	ReadError:   {"files", "at", "p"},
	Latency:     {"files", "dist", "p"},
	ShortRead:   {"files", "at", "p"},
	StallRead:   {"files", "at", "times", "rate", "length"},
	FlipBytes:   {"files", "at", "p"},
	Truncate:    {"files", "bytes"},
	StagePanic:  {"stage", "at", "p", "count"},
	SlowDevice:  {"devices", "factor", "dist"},
	StallDevice: {"devices", "at", "times", "rate", "length"},
	PanicDevice: {"devices", "at", "p"},
}

// Kinds lists the kinds a schedule may name, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kindFields))
	for _, k := range slices.Sorted(maps.Keys(kindFields)) {
		out = append(out, string(k))
	}
	return out
}

// panicKinds are the stage kinds a panic may name.
var panicKinds = []string{actors.KindFileReader, actors.KindFiles, actors.KindShuffle, actors.KindBatch,
	actors.KindMultiPass, actors.KindMerge, actors.KindDoubleBuffer, actors.KindDevice}

// Check validates the schedule: every fault's fields for its kind, ranges
// and windows. ParseSchedule calls it; call it on a schedule built in Go.
func (s *Schedule) Check() error {
	if len(s.Faults) > MaxFaults {
		return &ScheduleError{Msg: fmt.Sprintf("%d faults, more than the limit %d", len(s.Faults), MaxFaults)}
	}
	for i, f := range s.Faults {
		if msg := f.check(); msg != "" {
			return &ScheduleError{Line: f.Line, Fault: i + 1, Kind: f.Kind, Msg: msg}
		}
	}
	return nil
}

// check says what is wrong with f, or "".
func (f FaultSpec) check() string {
	fields, ok := kindFields[f.Kind]
	if !ok {
		return fmt.Sprintf("kind %q: want one of %s", f.Kind, strings.Join(Kinds(), ", "))
	}
	for _, name := range f.set() {
		if !slices.Contains(fields, name) {
			return fmt.Sprintf("field %s does not apply to %s (its fields: %s, from, until)", name, f.Kind, strings.Join(fields, ", "))
		}
	}
	if msg := f.checkRanges(); msg != "" {
		return msg
	}
	return f.checkKind()
}

// set names the fields f sets besides kind and the window.
func (f FaultSpec) set() []string {
	var out []string
	add := func(name string, set bool) {
		if set {
			out = append(out, name)
		}
	}
	add("files", f.Files != "")
	add("stage", f.Stage != "")
	add("devices", len(f.Devices) > 0)
	add("at", f.At != 0)
	add("p", f.P != 0)
	add("times", len(f.Times) > 0)
	add("rate", f.Rate != 0)
	add("dist", f.Dist != nil)
	add("factor", f.Factor != 0)
	add("length", f.Length != 0)
	add("count", f.Count != 0)
	add("bytes", f.Bytes != 0)
	return out
}

// checkRanges checks every value set against its range.
func (f FaultSpec) checkRanges() string {
	if f.Files != "" {
		if _, err := filepath.Match(f.Files, ""); err != nil {
			return fmt.Sprintf("files: %q is not a glob: %v", f.Files, err)
		}
	}
	switch {
	case f.From > MaxTime || f.Until > MaxTime || slices.ContainsFunc(f.Times, func(t time.Duration) bool { return t > MaxTime }):
		return fmt.Sprintf("from, until, times: want times since the run's start up to %v", MaxTime)
	case f.From < 0 || f.Until < 0 || (f.Until > 0 && f.Until <= f.From):
		return fmt.Sprintf("from %v, until %v: want 0 <= from < until (until 0 or left out: to the end)", f.From, f.Until)
	case f.At < 0 || f.At > maxCount:
		return fmt.Sprintf("at: want an integer from 1 to %d, got %d", maxCount, f.At)
	case f.P < 0 || f.P > 1:
		return fmt.Sprintf("p: want a probability in (0, 1], got %g", f.P)
	case f.Rate < 0 || f.Rate > MaxRate:
		return fmt.Sprintf("rate: want stalls per second in (0, %g], got %g", MaxRate, f.Rate)
	case f.Length < 0 || f.Length > MaxStall:
		return fmt.Sprintf("length: want a duration in (0, %v], got %v", MaxStall, f.Length)
	case f.Factor != 0 && (f.Factor < 1 || f.Factor > 1000):
		return fmt.Sprintf("factor: want a slowdown from 1 to 1000, got %g", f.Factor)
	case f.Count < 0 || f.Count > maxCount:
		return fmt.Sprintf("count: want an integer from 1 to %d, got %d", maxCount, f.Count)
	case f.Bytes < 0 || f.Bytes > maxBytes:
		return fmt.Sprintf("bytes: want an integer from 1 to %d, got %d", maxBytes, f.Bytes)
	case len(f.Times) > MaxListLen:
		return fmt.Sprintf("times: %d entries, more than the limit %d", len(f.Times), MaxListLen)
	case slices.ContainsFunc(f.Times, func(t time.Duration) bool { return t < 0 }):
		return "times: want durations >= 0 since the run's start"
	case slices.ContainsFunc(f.Devices, func(d int) bool { return d < 0 || d >= actors.MaxConcurrency }):
		return fmt.Sprintf("devices: want device numbers from 0 to %d, got %v", actors.MaxConcurrency-1, f.Devices)
	}
	if f.Stage != "" && !slices.Contains(panicKinds, f.Stage) {
		return fmt.Sprintf("stage: want a stage kind (%s), got %q", strings.Join(panicKinds, ", "), f.Stage)
	}
	if f.Dist != nil {
		if err := f.Dist.check(); err != nil {
			return "dist: " + err.Error()
		}
		if len(f.Dist.Empirical) > MaxListLen {
			return fmt.Sprintf("dist: empirical: %d samples, more than the limit %d", len(f.Dist.Empirical), MaxListLen)
		}
	}
	return ""
}

// checkKind checks that f has what its kind needs.
func (f FaultSpec) checkKind() string {
	when := 0
	for _, b := range []bool{f.At > 0, f.P > 0, len(f.Times) > 0, f.Rate > 0} {
		if b {
			when++
		}
	}
	switch f.Kind {
	case ReadError, ShortRead, FlipBytes, PanicDevice:
		if when != 1 {
			return "want exactly one of at (the Nth read or step of each target) and p (a probability per read or step)"
		}
	case StagePanic:
		if f.Stage == "" {
			return "stage: want the kind of the stage that panics"
		}
		if when != 1 {
			return "want exactly one of at (the Nth message of each stage of the kind) and p"
		}
		if f.Count > 0 && f.At == 0 {
			return "count: a storm of count panics in a row starts at a message: set at"
		}
	case Latency:
		if f.Dist == nil {
			return "dist: want the latency's distribution (fixed, uniform, lognormal or empirical)"
		}
	case StallRead, StallDevice:
		if when != 1 {
			return "want exactly one of at (the Nth read or step), times (when stalls begin) and rate (stalls per second)"
		}
		if f.At == 0 && f.Length == 0 {
			return "length: want how long each stall lasts"
		}
		if f.Kind == StallDevice && f.Length == 0 {
			return "length: want how long the device stalls"
		}
	case SlowDevice:
		if f.Factor == 0 && f.Dist == nil {
			return "want factor (step time x factor), dist (added to each step), or both"
		}
	case Truncate:
		if f.Bytes == 0 {
			return "bytes: want how many bytes the files lose at their end"
		}
		if f.From > 0 || f.Until > 0 {
			return "from, until: a truncated file is truncated from the start: no window"
		}
	}
	return ""
}

// timeShaped says whether f's effect is only time: latencies, stalls and
// slow devices, which scaled time models soundly (TimeScale).
func (f FaultSpec) timeShaped() bool {
	switch f.Kind {
	case Latency, StallDevice, SlowDevice:
		return true
	case StallRead:
		return f.Length > 0
	}
	return false
}

// scaled is f with every duration multiplied by k and its rate divided by
// it.
func (f FaultSpec) scaled(k float64) FaultSpec {
	s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * k) }
	f.From, f.Until, f.Length = s(f.From), s(f.Until), s(f.Length)
	times := make([]time.Duration, len(f.Times))
	for i, t := range f.Times {
		times[i] = s(t)
	}
	f.Times = times
	f.Rate /= k
	if f.Dist != nil {
		d := f.Dist.Scaled(k)
		f.Dist = &d
	}
	return f
}
