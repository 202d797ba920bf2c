package actors_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/tensor"
)

// within fails the test unless fn returns within d: Shutdown and Close are
// bounded in time, and a hang must fail, not stall the run.
func within(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-timer.C:
		t.Fatalf("did not finish within %v", d)
	}
}

func TestShutdownAndCloseFromAnyState(t *testing.T) {
	paths := testutil.WriteFiles(t, 3, 300, 600)
	chain := func() []actors.Stage {
		return []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 8}}
	}
	states := map[string]func(t *testing.T, p *actors.Pipeline){
		"fresh": func(*testing.T, *actors.Pipeline) {},
		"mid-pass": func(t *testing.T, p *actors.Pipeline) {
			for range 5 {
				_, err := p.Next(testutil.Context(t))
				require.NoError(t, err)
			}
		},
		"pass-ended": func(t *testing.T, p *actors.Pipeline) { drain(t, testutil.Context(t), p) },
		"after-reset": func(t *testing.T, p *actors.Pipeline) {
			_, err := p.Next(testutil.Context(t))
			require.NoError(t, err)
			require.NoError(t, p.Reset())
		},
	}
	for name, setup := range states {
		for _, how := range []string{"shutdown", "close"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				sys := actors.NewSystem()
				p, err := actors.New(chain(), actors.Options{System: sys})
				require.NoError(t, err)
				setup(t, p)
				within(t, time.Second, func() error {
					if how == "close" {
						return p.Close()
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					return p.Shutdown(ctx)
				})
				require.Empty(t, registered.Actors(sys))
				_, err = p.Next(testutil.Context(t))
				require.ErrorIs(t, err, actors.ErrShutdown)
				require.ErrorIs(t, p.Reset(), actors.ErrShutdown)
				require.NoError(t, p.Close(), "a second close is a no-op")
			})
		}
	}
}

func TestCloseStopsBusyDevices(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 400, 600)
	sys := actors.NewSystem()
	stepping := make(chan struct{}, 1)
	step := func(ctx context.Context, _ actors.Item) error {
		select {
		case stepping <- struct{}{}:
		default:
		}
		<-ctx.Done() // a step that only ends when the device stops
		return ctx.Err()
	}
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 8}},
		actors.Devices{N: 2, Step: step}, actors.Options{System: sys})
	require.NoError(t, err)
	<-stepping
	within(t, time.Second, p.Close)
	require.Empty(t, registered.Actors(sys))
	require.ErrorIs(t, p.Run(testutil.Context(t)), actors.ErrShutdown)
}

func TestHasNext(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 20, 600)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 8}}, actors.Options{System: sys})
	require.NoError(t, err)
	n := 0
	for {
		more, err := p.HasNext(ctx)
		require.NoError(t, err)
		if !more {
			break
		}
		_, err = p.Next(ctx)
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 3, n)
	closeAndCheck(t, p, sys)
}

// stuckForever is user code that ignores its context: it returns only when
// the test ends, and is the one goroutine a stop may leave behind.
func stuckForever(release <-chan struct{}) { <-release }

// A device step that ignored its ctx made Close take 10 s and return
// "future: timeout", leaving the pool's goroutines alive; Shutdown with a
// 500 ms deadline was still blocked after 40 s. Both now return within
// StopGrace of the abort, naming the abandoned step, and leave nothing of
// actorfeed's behind.
func TestCloseAndShutdownAbandonAStepThatNeverReturns(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 200, 600)
	for _, how := range []string{"close", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			stuck := make(chan struct{}, 1)
			step := func(ctx context.Context, _ actors.Item) error {
				if actors.DeviceFrom(ctx) == 1 {
					stuck <- struct{}{}
					stuckForever(release)
				}
				return nil
			}
			sys := actors.NewSystem()
			p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 10}},
				actors.Devices{N: 2, Step: step}, actors.Options{System: sys, StopGrace: 200 * time.Millisecond})
			require.NoError(t, err)
			<-stuck
			var stopErr error
			within(t, 2*time.Second, func() error { // a guard against the hang; the bound is StopGrace
				if how == "close" {
					stopErr = p.Close()
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					defer cancel()
					stopErr = p.Shutdown(ctx)
				}
				return nil
			})
			require.ErrorIs(t, stopErr, actors.ErrAbandoned)
			require.ErrorContains(t, stopErr, "device 1's step")
			require.Empty(t, registered.Actors(sys))
			sys.Shutdown()
			goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/actorfeed/actorfeed/actors_test.stuckForever"))
			require.NoError(t, p.Close(), "a second close is a no-op")
		})
	}
}

// An xmap function that never returns is abandoned the same way.
func TestCloseAbandonsAMapFunctionThatNeverReturns(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 100, 600)
	release := make(chan struct{})
	defer close(release)
	stuck := make(chan struct{}, 1)
	fn := func(s tensor.Slots) (tensor.Slots, error) {
		select {
		case stuck <- struct{}{}:
		default:
		}
		stuckForever(release)
		return s, nil
	}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.XMap{Fn: fn, Workers: 2}, actors.Batch{Size: 10}},
		actors.Options{System: sys, StopGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	<-stuck
	var stopErr error
	within(t, 2*time.Second, func() error { stopErr = p.Close(); return nil })
	require.ErrorIs(t, stopErr, actors.ErrAbandoned)
	require.ErrorContains(t, stopErr, "xmap's function")
	require.Empty(t, registered.Actors(sys))
	sys.Shutdown()
	goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/actorfeed/actorfeed/actors_test.stuckForever"))
}

// Reset while Run was in flight returned nil, and the running pass ended
// early (384 of 2000 samples) with no error. It is refused as Reset is
// while Next is in flight, and the pass runs to its end.
func TestResetIsRefusedWhileRunIsInFlight(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 300, 600)
	gate := make(chan struct{})
	stepped := make(chan struct{}, 1)
	step := func(ctx context.Context, it actors.Item) error {
		select {
		case stepped <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 10}},
		actors.Devices{N: 1, Step: step}, actors.Options{System: sys})
	require.NoError(t, err)
	defer p.Close()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(testutil.Context(t)) }()
	<-stepped
	// Run is in flight once it has looked at the pass: wait for that by
	// retrying Reset until it is refused, before any step is let through.
	for {
		err := p.Reset()
		if errors.Is(err, actors.ErrReadsInFlight) {
			break
		}
		require.NoError(t, err)
		select {
		case err := <-ran:
			t.Fatalf("Run returned %v after a Reset under it", err)
		default:
		}
		runtime.Gosched()
	}
	close(gate)
	require.NoError(t, <-ran)
	require.Equal(t, 600, p.Stats().Devices[0].Instances, "the pass ran to its end")
}

// Sizes near math.MaxInt overflowed the window arithmetic (a shuffle or
// double buffer that delivered nothing, forever) or panicked in makeslice.
// Every size is checked when the pipeline is built, naming the field.
func TestSizesBeyondTheLimitsAreRefusedAtConstruction(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 10, 600)
	files := actors.Files{Paths: paths}
	for name, tc := range map[string]struct {
		stages []actors.Stage
		dev    *actors.Devices
		opts   actors.Options
		want   string
	}{
		"shuffle":       {stages: []actors.Stage{files, actors.Shuffle{Window: math.MaxInt}}, want: "window"},
		"shuffle-1":     {stages: []actors.Stage{files, actors.Shuffle{Window: math.MaxInt - 1}}, want: "window"},
		"double buffer": {stages: []actors.Stage{files, actors.DoubleBuffer{Window: math.MaxInt}}, want: "window"},
		"batch":         {stages: []actors.Stage{files, actors.Batch{Size: math.MaxInt}}, want: "size"},
		"threads":       {stages: []actors.Stage{actors.Files{Paths: paths, Threads: math.MaxInt}}, want: "threads"},
		"buffer":        {stages: []actors.Stage{actors.Files{Paths: paths, Buffer: math.MaxInt}}, want: "buffer"},
		"xmap":          {stages: []actors.Stage{files, actors.XMap{Fn: func(s tensor.Slots) (tensor.Slots, error) { return s, nil }, Workers: 1, Buffer: math.MaxInt}}, want: "buffer"},
		"passes":        {stages: []actors.Stage{files, actors.MultiPass{Passes: math.MaxInt}}, want: "passes"},
		"devices":       {stages: []actors.Stage{files, actors.Batch{Size: 2}}, dev: &actors.Devices{N: math.MaxInt}, want: "N"},
		"options":       {stages: []actors.Stage{files}, opts: actors.Options{Window: math.MaxInt}, want: "Window"},
		"group bytes":   {stages: []actors.Stage{files}, opts: actors.Options{GroupBytes: math.MaxInt}, want: "GroupBytes"},
	} {
		t.Run(name, func(t *testing.T) {
			sys := actors.NewSystem()
			defer sys.Shutdown()
			tc.opts.System = sys
			var err error
			if tc.dev != nil {
				_, err = actors.NewDevices(tc.stages, *tc.dev, tc.opts)
			} else {
				_, err = actors.New(tc.stages, tc.opts)
			}
			require.ErrorIs(t, err, actors.ErrBadSpec)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "limit")
			require.Empty(t, registered.Actors(sys))
		})
	}
}

// Threads beyond the pieces of work start no more readers than pieces:
// files with AnyOrder, the order's splits (here a chunk a file) in it.
func TestThreadsAreCappedByThePieces(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 50, 0)
	sys := actors.NewSystem()
	for _, anyOrder := range []bool{true, false} {
		p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: actors.MaxConcurrency, AnyOrder: anyOrder}}, actors.Options{System: sys})
		require.NoError(t, err)
		readers := 0
		for _, st := range p.StageStats() {
			if strings.Contains(st.Stage, "/reader-") {
				readers++
			}
		}
		require.Equal(t, 2, readers, "any order %v", anyOrder)
		require.Len(t, drain(t, testutil.Context(t), p).ids, 100)
		require.NoError(t, p.Close())
	}
}

// Run again without Reset returned nil having delivered nothing; it says to
// call Reset.
func TestRunAgainWithoutResetIsAnError(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 50, 600)
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 10}},
		actors.Devices{N: 1, Step: func(context.Context, actors.Item) error { return nil }}, actors.Options{System: sys})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Run(testutil.Context(t)))
	require.ErrorIs(t, p.Run(testutil.Context(t)), actors.ErrPassDone)
	require.NoError(t, p.Reset())
	require.NoError(t, p.Run(testutil.Context(t)))
	require.Equal(t, 100, p.Stats().Devices[0].Instances)
}
