package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/program"
)

func injector(t *testing.T, seed uint64, faults ...FaultSpec) *Injector {
	t.Helper()
	in, err := NewInjector(&Schedule{Faults: faults}, InjectorOptions{Seed: seed})
	require.NoError(t, err)
	return in
}

// reads makes n reads of path and returns what the schedule did to each.
func reads(in *Injector, path string, n int) []readAction {
	out := make([]readAction, n)
	for i := range out {
		out[i] = in.onRead(path)
	}
	return out
}

func TestNthAndProbabilityFaultsFireAsScheduled(t *testing.T) {
	in := injector(t, 1,
		FaultSpec{Kind: ReadError, Files: "a.recordio", At: 5},
		FaultSpec{Kind: ShortRead, Files: "*.recordio", P: 0.1},
		FaultSpec{Kind: FlipBytes, Files: "b.recordio", At: 2},
		FaultSpec{Kind: ReadError, Files: "b.recordio", P: 1, From: time.Hour}) // never in its window
	acts := reads(in, "/data/a.recordio", 2000)
	var fails []int
	shorts := 0
	for i, a := range acts {
		if a.fail {
			fails = append(fails, i+1)
		}
		if a.short {
			shorts++
		}
		require.Equal(t, -1, a.flip, "flips target b only")
	}
	require.Equal(t, []int{5}, fails, "the 5th read of the file, once")
	// Binomial(2000, 0.1): mean 200, sd 13.4; the seed fixes the count.
	require.InDelta(t, 200, shorts, 40)
	b := reads(in, "/data/b.recordio", 3)
	require.Equal(t, []bool{false, true, false}, []bool{b[0].flip >= 0, b[1].flip >= 0, b[2].flip >= 0})
	require.False(t, b[0].fail || b[1].fail || b[2].fail, "outside its window")
	got := in.Injected()
	require.Equal(t, []int{1, shorts + countShort(b), 1, 0}, got.Fired)
}

func countShort(acts []readAction) int {
	n := 0
	for _, a := range acts {
		if a.short {
			n++
		}
	}
	return n
}

func TestLatencyDistributions(t *testing.T) {
	ms := time.Millisecond
	draws := func(d Dist) []time.Duration {
		in := injector(t, 3, FaultSpec{Kind: Latency, Dist: &d})
		out := make([]time.Duration, 20000)
		for i := range out {
			out[i] = in.onRead("f.recordio").delay
		}
		slices.Sort(out)
		return out
	}
	q := func(xs []time.Duration, p float64) float64 { return float64(xs[int(p*float64(len(xs)))]) / float64(ms) }

	ln := draws(Dist{LogNormal: &LogNormal{Median: 2 * ms, P99: 50 * ms}})
	require.InEpsilon(t, 2.0, q(ln, 0.5), 0.05, "median")
	require.InEpsilon(t, 50.0, q(ln, 0.99), 0.15, "p99")
	require.LessOrEqual(t, ln[len(ln)-1], MaxTail*50*ms)

	un := draws(Dist{Uniform: &[2]time.Duration{ms, 3 * ms}})
	require.GreaterOrEqual(t, un[0], ms)
	require.LessOrEqual(t, un[len(un)-1], 3*ms)
	require.InEpsilon(t, 2.0, q(un, 0.5), 0.03)
	require.InEpsilon(t, 1.5, q(un, 0.25), 0.05)

	em := draws(Dist{Empirical: []time.Duration{ms, ms, 40 * ms}})
	long := len(em) - slices.Index(em, 40*ms)
	require.InEpsilon(t, float64(len(em))/3, float64(long), 0.05, "a third of the draws are the 40 ms sample")

	fx := draws(Dist{Fixed: 5 * ms})
	require.Equal(t, 5*ms, fx[0])
	require.Equal(t, 5*ms, fx[len(fx)-1])
}

func TestTheSameSeedGivesTheSameFaultSequence(t *testing.T) {
	faults := []FaultSpec{
		{Kind: ReadError, P: 0.05},
		{Kind: Latency, Dist: &Dist{LogNormal: &LogNormal{Median: time.Millisecond, P99: 9 * time.Millisecond}}, P: 0.3},
		{Kind: FlipBytes, P: 0.02},
	}
	seq := func(seed uint64) []readAction {
		in := injector(t, seed, faults...)
		// Two files read in turns: each file's sequence is its own.
		var out []readAction
		for range 500 {
			out = append(out, in.onRead("a.recordio"), in.onRead("b.recordio"))
		}
		return out
	}
	first := seq(7)
	require.Equal(t, first, seq(7))
	require.NotEqual(t, first, seq(8))

	// Interleaving does not matter: reading b first gives a the same.
	in := injector(t, 7, faults...)
	reads(in, "b.recordio", 500)
	a := reads(in, "a.recordio", 500)
	for i := range a {
		require.Equal(t, first[2*i], a[i], "read %d of a", i)
	}
}

func TestStagePanicsStrikeTheirMessages(t *testing.T) {
	in := injector(t, 1, FaultSpec{Kind: StagePanic, Stage: "batch", At: 3, Count: 2})
	var struck []int
	for n := 1; n <= 8; n++ {
		for _, stage := range []string{"2-batch", "1-shuffle"} {
			kind := stage[2:]
			func() {
				defer func() {
					if recover() != nil {
						require.Equal(t, "2-batch", stage)
						struck = append(struck, n)
					}
				}()
				in.BeforeMessage(stage, kind, int64(n), nil)
			}()
		}
	}
	require.Equal(t, []int{3, 4}, struck, "a storm of two from the third message")
	require.Equal(t, []int{2}, in.Injected().Fired)
}

func TestDeviceFaults(t *testing.T) {
	in := injector(t, 1,
		FaultSpec{Kind: PanicDevice, Devices: []int{1}, At: 2},
		FaultSpec{Kind: StallDevice, Devices: []int{0}, Length: time.Hour, Times: []time.Duration{0}},
		FaultSpec{Kind: SlowDevice, Factor: 3, Dist: &Dist{Fixed: time.Millisecond}, Until: time.Hour})
	a := in.onStep(1)
	require.False(t, a.crash)
	require.Equal(t, 3.0, a.factor)
	require.Equal(t, time.Millisecond, a.extra)
	require.Zero(t, a.stallUntil)
	require.True(t, in.onStep(1).crash, "the second step of device 1")
	require.False(t, in.onStep(1).crash)
	s := in.onStep(0)
	require.Equal(t, time.Hour, s.stallUntil, "device 0 is stalled from 0 to 1h")
	got := in.Injected()
	require.Equal(t, []int{1, 1, 4}, got.Fired)
	require.Len(t, got.Stalls, 1)
	require.Equal(t, Window{Fault: 1, Kind: StallDevice, From: 0, Until: time.Hour}, got.Stalls[0])
}

func TestStallsByRateArriveAtTheSeedsTimes(t *testing.T) {
	f := FaultSpec{Kind: StallRead, Rate: 2, Length: 10 * time.Millisecond}
	stalls := func(seed uint64) ([]Window, int) {
		in := injector(t, seed, f)
		in.mu.Lock()
		for now := time.Duration(0); now < 60*time.Second; now += time.Millisecond {
			in.stallAt(0, now)
		}
		kept := len(in.arrivals[0].at)
		in.mu.Unlock()
		return in.Injected().Stalls, kept
	}
	a, kept := stalls(5)
	require.LessOrEqual(t, kept, 1, "stalls that ended are not kept")
	// Poisson arrivals at 2/s for 60 s: 120 expected, sd 11.
	require.InDelta(t, 120, len(a), 40)
	for _, w := range a {
		require.Equal(t, 10*time.Millisecond, w.Until-w.From)
	}
	b, _ := stalls(5)
	require.Equal(t, a, b)
	c, _ := stalls(6)
	require.NotEqual(t, a, c)
}

func TestScaledTimeRefusesFaultsOfCounts(t *testing.T) {
	_, err := NewInjector(&Schedule{Faults: []FaultSpec{{Kind: ReadError, At: 1}}}, InjectorOptions{TimeScale: 0.1})
	require.ErrorIs(t, err, ErrBadSchedule)
	require.Contains(t, err.Error(), "scaled time models latencies, stalls and slow devices only")
	in, err := NewInjector(&Schedule{Faults: []FaultSpec{{Kind: Latency, Dist: &Dist{Fixed: time.Second}, From: 10 * time.Second}}}, InjectorOptions{TimeScale: 0.1})
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, in.faults[0].Dist.Fixed)
	require.Equal(t, time.Second, in.faults[0].From)
	require.Equal(t, []Window{{Fault: 0, Kind: Latency, From: 10 * time.Second}}, in.Windows(), "reported unscaled")
}

func TestReadStallsAndProbablePanics(t *testing.T) {
	in := injector(t, 2,
		FaultSpec{Kind: StallRead, Files: "a.rio", At: 2},
		FaultSpec{Kind: StallRead, Files: "b.rio", Length: time.Second, Times: []time.Duration{0}},
		FaultSpec{Kind: StagePanic, Stage: "shuffle", P: 0.25})
	a := reads(in, "a.rio", 3)
	require.Equal(t, []bool{false, true, false}, []bool{a[0].stallForever, a[1].stallForever, a[2].stallForever},
		"the second read of a blocks until the runtime abandons it")
	b := in.onRead("b.rio")
	require.Equal(t, time.Second, b.stallUntil, "b's storage is stalled from 0 to 1 s")
	panics := 0
	for n := range 4000 {
		func() {
			defer func() {
				if recover() != nil {
					panics++
				}
			}()
			in.BeforeMessage("1-shuffle", "shuffle", int64(n+1), nil)
		}()
	}
	// Binomial(4000, 0.25): mean 1000, sd 27.
	require.InDelta(t, 1000, panics, 100)
	require.Equal(t, []int{1, 1, panics}, in.Injected().Fired)
}

// A Go DoubleBuffer's zero Window is its default, 2 batches per device,
// and the bound counts them so (it took 1, and flagged pipelines within
// their bound).
func TestWhatIfBoundTakesTheDoubleBuffersDefault(t *testing.T) {
	stages := []actors.Stage{actors.Files{Paths: []string{"a.rio"}}, actors.Batch{Size: 16}}
	pl := plan{feed: program.DeviceSpec{N: 3}}
	pl.stages = append(slices.Clone(stages), actors.DoubleBuffer{})
	implicit := pl.bound(actors.Options{})
	pl.stages = append(slices.Clone(stages), actors.DoubleBuffer{Window: 2})
	require.Equal(t, pl.bound(actors.Options{}), implicit)
}
