package sim_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/sim"
)

// everyKind is a schedule with every kind of fault, as docs/simulation.md
// shows them.
const everyKind = `faults:
  - {kind: read-error, files: "part-1.recordio", at: 3}
  - {kind: read-error, files: "*.recordio", p: 0.001, from: 10s, until: 20s}
  - kind: latency
    files: "part-*"
    dist: {lognormal: {median: 2ms, p99: 50ms}}
  - {kind: latency, dist: {fixed: 1ms}, p: 0.5}
  - {kind: latency, dist: {uniform: [1ms, 3ms]}}
  - {kind: latency, dist: {empirical: [1ms, 1ms, 40ms]}}
  - {kind: stall-read, length: 2s, times: [5s, 30s]}
  - {kind: stall-read, length: 100ms, rate: 0.1}
  - {kind: stall-read, at: 7}
  - {kind: short-read, at: 2}
  - {kind: flip-bytes, p: 0.01}
  - {kind: truncate, files: part-3.recordio, bytes: 100}
  - {kind: panic, stage: shuffle, at: 40}
  - {kind: panic, stage: batch, at: 10, count: 25}
  - {kind: panic, stage: file_reader, p: 0.001}
  - {kind: slow-device, device: 0, factor: 2}
  - {kind: slow-device, devices: [1, 2], dist: {fixed: 5ms}, from: 1m}
  - {kind: stall-device, device: 3, length: 1s, times: [10s]}
  - {kind: stall-device, length: 50ms, at: 100}
  - {kind: panic-device, device: 1, at: 5}
`

func TestParseScheduleEveryKind(t *testing.T) {
	s, err := sim.ParseSchedule([]byte(everyKind))
	require.NoError(t, err)
	require.Len(t, s.Faults, 20)
	f := s.Faults[1]
	require.Equal(t, sim.ReadError, f.Kind)
	require.Equal(t, 0.001, f.P)
	require.Equal(t, 10*time.Second, f.From)
	require.Equal(t, 20*time.Second, f.Until)
	require.Equal(t, 3, s.Faults[0].At)
	require.Equal(t, &sim.LogNormal{Median: 2 * time.Millisecond, P99: 50 * time.Millisecond}, s.Faults[2].Dist.LogNormal)
	require.Equal(t, []time.Duration{5 * time.Second, 30 * time.Second}, s.Faults[6].Times)
	require.Equal(t, 0.1, s.Faults[7].Rate)
	require.Equal(t, int64(100), s.Faults[11].Bytes)
	require.Equal(t, 25, s.Faults[13].Count)
	require.Equal(t, []int{1, 2}, s.Faults[16].Devices)
	require.Equal(t, 5, s.Faults[19].At)
	require.Equal(t, 23, s.Faults[19].Line)
	seen := map[string]bool{}
	for _, f := range s.Faults {
		seen[string(f.Kind)] = true
	}
	require.Len(t, seen, len(sim.Kinds()), "every kind appears")
}

func TestBadSchedulesNameTheirLine(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"faults:\n  - {kind: latency, files: '*', dist: {fixed: 5ms}, speed: 3}\n", "line 2: fault 1 (latency): a fault: unknown key \"speed\""},
		{"faults:\n  - {kind: latency}\n", "line 2: fault 1 (latency): dist: want the latency's distribution"},
		{"faults:\n  - {kind: read-error, at: 3}\n  - {kind: read-error, at: 3, p: 0.5}\n", "line 3: fault 2 (read-error): want exactly one of at"},
		{"faults:\n  - kind: latency\n    dist: {lognormal: {median: 5ms, p99: 1ms}}\n", "line 3: fault 1 (latency): dist: lognormal: want 0 < median <= p99"},
		{"faults:\n  - {kind: teleport}\n", "line 2: fault 1 (teleport): kind \"teleport\": want one of"},
		{"faults:\n  - {kind: stall-read, times: [5s]}\n", "line 2: fault 1 (stall-read): length: want how long each stall lasts"},
		{"faults:\n  - {kind: panic, stage: shufle, at: 1}\n", "line 2: fault 1 (panic): stage: want a stage kind"},
		{"faults:\n  - {kind: read-error, p: 2}\n", "line 2: fault 1 (read-error): p: want a probability in (0, 1], got 2"},
		{"faults:\n  - {kind: read-error, at: 1, from: 20s, until: 10s}\n", "line 2: fault 1 (read-error): from 20s, until 10s"},
		{"faults:\n  - {kind: latency, dist: {fixed: soon}}\n", "line 2: fault 1 (latency): dist: fixed: want a duration such as 5ms, got \"soon\""},
		{"faults:\n  - {kind: truncate, bytes: 10, from: 1s}\n", "line 2: fault 1 (truncate): from, until: a truncated file"},
		{"faults:\n  - {kind: slow-device, factor: 0.5}\n", "line 2: fault 1 (slow-device): factor: want a slowdown >= 1"},
		{"faults:\n  - {kind: read-error, at: x}\n", "line 2: fault 1 (read-error): at: cannot unmarshal"},
		{"faults:\n  - {kind: panic, stage: batch, p: 0.1, count: 3}\n", "line 2: fault 1 (panic): count: a storm"},
		{"faults:\n  - {kind: short-read, at: 1, dist: {fixed: 1ms}}\n", "line 2: fault 1 (short-read): field dist does not apply to short-read"},
		{"fault:\n  - {kind: read-error, at: 1}\n", "line 1: top level: unknown key \"fault\""},
		{"faults: [\n", "line 1: did not find expected node content"},
	} {
		_, err := sim.ParseSchedule([]byte(tc.doc))
		require.Error(t, err, tc.doc)
		require.True(t, errors.Is(err, sim.ErrBadSchedule), "%v", err)
		require.Contains(t, err.Error(), tc.want)
	}
}

// The schedules the README and docs/simulation.md show parse as written.
func TestDocumentedSchedulesParse(t *testing.T) {
	blocks := 0
	for _, path := range []string{"../README.md", "../docs/simulation.md"} {
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
			if !bytes.HasPrefix(m[1], []byte("faults:")) {
				continue
			}
			_, err := sim.ParseSchedule(m[1])
			require.NoError(t, err, "%s:\n%s", path, m[1])
			blocks++
		}
	}
	require.GreaterOrEqual(t, blocks, 5)
}

// Any input gives a schedule that passes its own Check, or a
// *ScheduleError: never a panic, and never a schedule with a value out of
// its range.
func FuzzParseSchedule(f *testing.F) {
	f.Add([]byte(everyKind))
	f.Add([]byte("faults:\n  - {kind: latency, dist: {empirical: [1ms, 2ms]}, from: 1s, until: 2s}\n"))
	f.Add([]byte("faults:\n  - {kind: stall-device, devices: [0, 1], length: 1s, rate: 0.5}\n"))
	f.Add([]byte("faults: [{kind: read-error, at: 9223372036854775807}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := sim.ParseSchedule(data)
		if err != nil {
			var se *sim.ScheduleError
			if !errors.As(err, &se) {
				t.Fatalf("not a *ScheduleError: %v", err)
			}
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("a parsed schedule fails Check: %v", err)
		}
		in, err := sim.NewInjector(s, sim.InjectorOptions{Seed: 1})
		if err != nil {
			t.Fatalf("a parsed schedule makes no injector: %v", err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for _, f := range s.Faults {
			for range 4 {
				if d := f.Dist; d != nil && (d.Draw(r) < 0 || d.Draw(r) > sim.MaxTail*sim.MaxStall) {
					t.Fatalf("%v drew out of range", f)
				}
			}
		}
		for _, kind := range []string{"shuffle", "batch", "file_reader", "device"} {
			func() {
				defer func() { _ = recover() }() // a scheduled panic is the point
				in.BeforeMessage("0-"+kind, kind, 1, nil)
			}()
		}
	})
}

// An indentation error on line 4 was reported at line 1.
func TestScheduleSyntaxErrorNamesItsOwnLine(t *testing.T) {
	_, err := sim.ParseSchedule([]byte("faults:\n  - kind: latency\n    files: x\n   dist: {}\n"))
	var se *sim.ScheduleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 4, se.Line, "%v", err)
}
