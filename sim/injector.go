package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
)

// Injector applies a Schedule to a pipeline: Open wraps its file reads,
// BeforeMessage (a faults.Injector, for actors.Options.Faults) panics its
// stages, and Step wraps its devices' steps. Options sets both options at
// once. Windows count from the first read, message or step (or from
// Start). An Injector is safe for concurrent use; use one per run.
//
// Every decision is a function of the seed, the fault, the target (a
// file's base name, a stage's name, a device) and how many reads, messages
// or steps of that target the fault's window saw before: the same seed gives
// the same fault sequence whatever the goroutines' interleaving, and
// stalls by rate arrive at the same times.
type Injector struct {
	faults []FaultSpec // scaled
	seed   uint64
	scale  float64

	startOnce sync.Once
	start     time.Time

	mu       sync.Mutex
	counts   map[target]int
	fired    []int
	kinds    map[FaultKind]int
	delay    time.Duration // injected, scaled time
	stalled  map[int]time.Duration
	stalls   map[stallKey]Window // stalls that began
	arrivals map[int]*arrivals
	cut      map[string]bool // files a truncation cut
}

// target is a fault and what it applies to (a path, a stage name, a
// device number).
type target struct {
	fault int
	name  string
}

// stallKey is a stall by its fault and its start.
type stallKey struct {
	fault int
	at    time.Duration
}

// InjectorOptions tune NewInjector.
type InjectorOptions struct {
	// Seed seeds every probabilistic decision and draw.
	Seed uint64
	// TimeScale multiplies every duration of the schedule (latencies,
	// stalls, windows) and divides its rates; 0 is 1. Below 1 it runs a
	// schedule faster than real time; only time-shaped faults (latency,
	// stall-read with a length, slow-device, stall-device) may be scaled
	// (docs/simulation.md says why).
	TimeScale float64
}

// NewInjector checks s and returns an injector for it.
func NewInjector(s *Schedule, o InjectorOptions) (*Injector, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.TimeScale < 0 || o.TimeScale > 1000 {
		return nil, fmt.Errorf("%w: time scale %g: want a factor in (0, 1000]", ErrBadSchedule, o.TimeScale)
	}
	in := &Injector{seed: o.Seed, scale: o.TimeScale, counts: map[target]int{}, fired: make([]int, len(s.Faults)),
		kinds: map[FaultKind]int{}, stalled: map[int]time.Duration{}, stalls: map[stallKey]Window{},
		arrivals: map[int]*arrivals{}, cut: map[string]bool{}}
	for i, f := range s.Faults {
		if o.TimeScale != 1 && !f.timeShaped() {
			return nil, &ScheduleError{Line: f.Line, Fault: i + 1, Kind: f.Kind, Msg: "scaled time models latencies, stalls and slow devices only: " +
				"errors, corruption and panics make the runtime retry and restart on schedules of real time"}
		}
		in.faults = append(in.faults, f.scaled(o.TimeScale))
	}
	return in, nil
}

// Start starts the schedule's clock at t, if nothing started it yet.
func (in *Injector) Start(t time.Time) { in.startOnce.Do(func() { in.start = t }) }

// now is the time since the schedule's start, starting it.
func (in *Injector) now() time.Duration {
	in.Start(time.Now())
	return time.Since(in.start)
}

// Options returns o with its Open wrapped (around o.Open, or
// actors.OpenFile) and, when the schedule panics stages, its Faults set to
// in: without stage faults no message pays for the check.
func (in *Injector) Options(o actors.Options) actors.Options {
	o.Open = in.Open(o.Open)
	if slices.ContainsFunc(in.faults, func(f FaultSpec) bool { return f.Kind == StagePanic }) {
		o.Faults = in
	}
	return o
}

// active says whether fault i applies at now.
func (in *Injector) active(i int, now time.Duration) bool {
	f := in.faults[i]
	return now >= f.From && (f.Until == 0 || now < f.Until)
}

// next counts one more event of target t in fault t.fault's window and
// returns its number (from 1) and the generator of its draws, which follow
// key (for a file its base name, so that the same seed gives the same
// faults on another machine or in a test's temporary directory). mu is
// held.
func (in *Injector) next(t target, key string) (int, *rand.Rand) {
	in.counts[t]++
	n := in.counts[t]
	h := fnv.New64a()
	h.Write([]byte(key))
	return n, rand.New(rand.NewPCG(mix(in.seed, uint64(t.fault)), mix(h.Sum64(), uint64(n))))
}

// mix is splitmix64 of a and b: nearby inputs give unrelated outputs.
func mix(a, b uint64) uint64 {
	z := a ^ (b+0x9e3779b97f4a7c15)*0xbf58476d1ce4e5b9
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// chosen says whether the n-th event of a fault's target is one it
// strikes: the At-th (and Count-1 after it), or with probability P.
func (f FaultSpec) chosen(n int, r *rand.Rand) bool {
	if f.At > 0 {
		return n >= f.At && n < f.At+max(f.Count, 1)
	}
	return f.P > 0 && r.Float64() < f.P
}

// fire counts a firing of fault i; mu is held.
func (in *Injector) fire(i int) {
	in.fired[i]++
	in.kinds[in.faults[i].Kind]++
}

// arrivals are a rate fault's stall start times, drawn in sequence.
type arrivals struct {
	r    *rand.Rand
	next time.Duration
	at   []time.Duration // arrivals whose stall may still be on
}

// stallAt returns the end of the stall of fault i that is on at now, if
// any, recording it the first time it is seen; mu is held.
func (in *Injector) stallAt(i int, now time.Duration) (time.Duration, bool) {
	f := in.faults[i]
	starts := f.Times
	if f.Rate > 0 {
		a := in.arrivals[i]
		if a == nil {
			a = &arrivals{r: rand.New(rand.NewPCG(mix(in.seed, uint64(i)), 0x57a11))}
			a.next = time.Duration(a.r.ExpFloat64() / f.Rate * float64(time.Second))
			in.arrivals[i] = a
		}
		for a.next <= now {
			a.at = append(a.at, a.next)
			a.next += time.Duration(a.r.ExpFloat64() / f.Rate * float64(time.Second))
		}
		for len(a.at) > 0 && a.at[0]+f.Length <= now {
			a.at = a.at[1:]
		}
		starts = a.at
	}
	for _, t := range starts {
		if t <= now && now < t+f.Length {
			k := stallKey{fault: i, at: t}
			if _, seen := in.stalls[k]; !seen {
				in.stalls[k] = Window{Fault: i, Kind: f.Kind, From: t, Until: t + f.Length}
				in.fire(i)
			}
			return t + f.Length, true
		}
	}
	return 0, false
}

// matchesFile says whether fault f targets the file at path.
func (f FaultSpec) matchesFile(path string) bool {
	if f.Files == "" {
		return true
	}
	ok1, _ := filepath.Match(f.Files, path)
	ok2, _ := filepath.Match(f.Files, filepath.Base(path))
	return ok1 || ok2
}

// fileFault says whether kind k is a fault of files.
func fileFault(k FaultKind) bool {
	switch k {
	case ReadError, Latency, ShortRead, StallRead, FlipBytes, Truncate:
		return true
	}
	return false
}

// Window is a span of a run in which a fault applied: a fault's window,
// or a stall that happened. Times are since the run's start, in the
// schedule's time (unscaled).
type Window struct {
	Fault       int // index in the schedule
	Kind        FaultKind
	From, Until time.Duration // Until 0: to the end
}

// Injected is what an injector did.
type Injected struct {
	// Fired counts, per fault of the schedule, the reads, messages, steps
	// or files it struck; ByKind sums them by kind.
	Fired  []int
	ByKind map[FaultKind]int
	// Delay is the latency, stall and slowdown time injected, summed over
	// reads and steps (which may overlap), in the schedule's time.
	Delay time.Duration
	// DeviceStalled is the time each device spent stalled.
	DeviceStalled map[int]time.Duration
	// Stalls are the stalls that began by times or rate, in order.
	Stalls []Window
}

// Injected reports what the injector did so far.
func (in *Injector) Injected() Injected {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := Injected{Fired: slices.Clone(in.fired), ByKind: maps.Clone(in.kinds), Delay: in.unscale(in.delay),
		DeviceStalled: map[int]time.Duration{}}
	for d, t := range in.stalled {
		out.DeviceStalled[d] = in.unscale(t)
	}
	for _, w := range in.stalls {
		w.From, w.Until = in.unscale(w.From), in.unscale(w.Until)
		out.Stalls = append(out.Stalls, w)
	}
	slices.SortFunc(out.Stalls, func(a, b Window) int { return int(a.From - b.From) })
	return out
}

// unscale turns a duration of scaled time into the schedule's.
func (in *Injector) unscale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / in.scale)
}

// Windows are the bounded windows of the schedule's faults, in the
// schedule's time: the spans a report shades, with the stalls that
// happened.
func (in *Injector) Windows() []Window {
	var out []Window
	for i, f := range in.faults {
		if f.From > 0 || f.Until > 0 {
			out = append(out, Window{Fault: i, Kind: f.Kind, From: in.unscale(f.From), Until: in.unscale(f.Until)})
		}
	}
	return append(out, in.Injected().Stalls...)
}

// Open wraps next (actors.OpenFile when nil) so that the files the
// schedule's file faults target are read through them. File faults apply
// to RecordIO files, WebDataset shards and TFRecord files; opening another
// format's file that one targets is an error wrapping ErrBadSchedule.
func (in *Injector) Open(next func(ctx context.Context, entry string) (readers.Reader, error)) func(ctx context.Context, entry string) (readers.Reader, error) {
	if next == nil {
		next = actors.OpenFile
	}
	return func(ctx context.Context, entry string) (readers.Reader, error) {
		name, path, err := readers.ParseEntry(entry)
		if err != nil {
			return nil, err
		}
		if !in.targetsFile(path) {
			return next(ctx, entry)
		}
		switch base, _, _ := strings.Cut(name, "("); base {
		case "recordio":
			return in.openFile(ctx, path)
		case "wds", "tfrecord":
			return in.openStream(ctx, entry, base, path)
		}
		return nil, fmt.Errorf("%w: %s is a %s file: file faults apply to RecordIO, WebDataset and TFRecord files", ErrBadSchedule, path, name)
	}
}

// targetsFile says whether a file fault targets path.
func (in *Injector) targetsFile(path string) bool {
	return slices.ContainsFunc(in.faults, func(f FaultSpec) bool { return fileFault(f.Kind) && f.matchesFile(path) })
}
