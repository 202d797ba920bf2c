package ticker

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Stop must join the ticking goroutine: none is left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type tock struct{}

// A Ticker sends until stopped, and Stop returns once its goroutine is gone
// (the package's goleak check sees none left); stopping twice, or a nil
// Ticker, does nothing.
func TestTickerSendsUntilStopped(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	got := make(chan struct{}, 16)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(tock); ok {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}))
	tk := Start(sys.Root, time.Millisecond, pid, tock{})
	for range 3 {
		<-got
	}
	tk.Stop()
	tk.Stop()
	var none *Ticker
	none.Stop()
	require.NoError(t, sys.Root.StopFuture(pid).Wait())
}
