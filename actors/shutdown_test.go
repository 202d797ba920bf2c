package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
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
	paths := writeFiles(t, 3, 300, 600)
	chain := func() []actors.Stage {
		return []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 8}}
	}
	states := map[string]func(t *testing.T, p *actors.Pipeline){
		"fresh": func(*testing.T, *actors.Pipeline) {},
		"mid-pass": func(t *testing.T, p *actors.Pipeline) {
			for range 5 {
				_, ok, err := p.Next(testCtx(t))
				require.NoError(t, err)
				require.True(t, ok)
			}
		},
		"pass-ended": func(t *testing.T, p *actors.Pipeline) { drain(t, testCtx(t), p) },
		"after-reset": func(t *testing.T, p *actors.Pipeline) {
			_, _, err := p.Next(testCtx(t))
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
				require.Empty(t, actors.Registered(sys))
				_, _, err = p.Next(testCtx(t))
				require.ErrorIs(t, err, actors.ErrShutdown)
				require.ErrorIs(t, p.Reset(), actors.ErrShutdown)
				require.NoError(t, p.Close(), "a second close is a no-op")
			})
		}
	}
}

func TestCloseStopsBusyDevices(t *testing.T) {
	paths := writeFiles(t, 2, 400, 600)
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
	require.Empty(t, actors.Registered(sys))
	require.ErrorIs(t, p.Run(testCtx(t)), actors.ErrShutdown)
}

func TestHasNext(t *testing.T) {
	ctx := testCtx(t)
	paths := writeFiles(t, 1, 20, 600)
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
		_, ok, err := p.Next(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		n++
	}
	require.Equal(t, 3, n)
	closeAndCheck(t, p, sys)
}
