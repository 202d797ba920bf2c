package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

type tock struct{}

// A ticker sends until stopped, and stop returns once its goroutine is gone
// (the package's goleak check sees none left); stopping twice, or a nil
// ticker, does nothing.
func TestTickerSendsUntilStopped(t *testing.T) {
	sys := NewSystem()
	got := make(chan struct{}, 16)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(tock); ok {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}))
	tk := startTicker(sys.Root, time.Millisecond, pid, tock{})
	for range 3 {
		<-got
	}
	tk.stop()
	tk.stop()
	var none *ticker
	none.stop()
	require.NoError(t, sys.Root.StopFuture(pid).Wait())
}
