package supervisor_test

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/supervisor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tracked runs every mailbox run on its own goroutine and can wait for all
// of them: once it has, every message queued so far has been handled.
type tracked struct{ wg sync.WaitGroup }

func (d *tracked) Schedule(fn func()) { d.wg.Go(fn) }
func (d *tracked) Throughput() int    { return 300 }

// parent spawns one child and halts its strategy when it begins to stop,
// as a pipeline's supervising actor does.
type parent struct {
	strategy *supervisor.Strategy
	child    *actor.Props
	kid      chan *actor.PID
	stopping chan struct{}
}

func (p *parent) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		p.kid <- ctx.Spawn(p.child)
	case *actor.Stopping:
		p.strategy.Halt()
		close(p.stopping)
	}
}

// child counts its starts; "fail" makes it say so on failing, wait for
// release, then panic.
// Its Stopping waits until its supervisor has handled the failure, as a
// stage's does while it joins a goroutine that finishes a slow item.
type child struct {
	starts   *atomic.Int32
	failing  chan struct{}
	release  chan struct{}
	answered chan struct{}
}

func (c *child) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		c.starts.Add(1)
	case *actor.Stopping:
		<-c.answered
	case string:
		close(c.failing)
		<-c.release
		panic("the stage failed")
	}
}

// answering tells when its strategy has handled a failure.
type answering struct {
	*supervisor.Strategy
	answered chan struct{}
}

func (a answering) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	a.Strategy.HandleFailure(sys, sup, child, rs, reason, msg)
	close(a.answered)
}

// A stage that fails while its supervisor stops it is not restarted. It
// has been sent Stop already; a Restart queued behind it, while it is still
// stopping, would start it again after it stopped and left the process
// registry, where nothing stops it (a sim run of 6,000 scenarios left an
// xmap stage's two workers running so).
func TestStrategyRestartsNothingOnceHalted(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	var starts atomic.Int32
	failing, release, answered := make(chan struct{}), make(chan struct{}), make(chan struct{})
	mailboxes := &tracked{}
	strategy := &supervisor.Strategy{Tracker: supervisor.NewTracker(supervisor.DefaultIntensity())}
	p := &parent{strategy: strategy, kid: make(chan *actor.PID, 1), stopping: make(chan struct{}),
		child: actor.PropsFromProducer(func() actor.Actor {
			return &child{starts: &starts, failing: failing, release: release, answered: answered}
		},
			actor.WithDispatcher(mailboxes))}
	top := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p },
		actor.WithSupervisor(answering{Strategy: strategy, answered: answered})))
	kid := <-p.kid

	sys.Root.Send(kid, "fail")
	<-failing                           // the child waits in its Receive
	stopped := sys.Root.StopFuture(top) // the parent stops, and sends the child Stop
	<-p.stopping
	close(release) // the child fails; its Failure reaches a stopping parent
	require.NoError(t, stopped.Wait())
	mailboxes.wg.Wait() // the child has handled all it was sent
	require.Equal(t, int32(1), starts.Load(), "the child was started again after it stopped")
}

// Past the intensity every child is stopped, and a failure after that
// restarts none either.
func TestStrategyHaltsAtTheBreach(t *testing.T) {
	var breaches int
	strategy := &supervisor.Strategy{Tracker: supervisor.NewTracker(supervisor.Intensity{MaxRestarts: 1, Within: time.Hour}),
		OnBreach: func(*actor.PID, any) { breaches++ }}
	sup := &fakeSupervisor{}
	a, b := actor.NewPID("test", "a"), actor.NewPID("test", "b")
	sup.children = []*actor.PID{a, b}
	strategy.HandleFailure(nil, sup, a, nil, "first", nil)
	require.Equal(t, []*actor.PID{a}, sup.restarted)
	strategy.HandleFailure(nil, sup, b, nil, "second", nil)
	require.Equal(t, []*actor.PID{a, b}, sup.stopped, "the breach stops every child")
	require.Equal(t, 1, breaches)
	strategy.HandleFailure(nil, sup, a, nil, "third", nil)
	require.Equal(t, []*actor.PID{a}, sup.restarted, "nothing is restarted after the breach")
	require.Equal(t, 1, breaches, "the breach is reported once")
}

// fakeSupervisor records what a strategy asks of it.
type fakeSupervisor struct {
	children, restarted, stopped []*actor.PID
}

func (f *fakeSupervisor) Children() []*actor.PID   { return f.children }
func (f *fakeSupervisor) EscalateFailure(any, any) {}
func (f *fakeSupervisor) RestartChildren(pids ...*actor.PID) {
	f.restarted = append(f.restarted, pids...)
}
func (f *fakeSupervisor) StopChildren(pids ...*actor.PID)   { f.stopped = append(f.stopped, pids...) }
func (f *fakeSupervisor) ResumeChildren(pids ...*actor.PID) {}
