package service

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/messages"
)

// taskSender is a client that sends a worker tasks as soon as it starts.
type taskSender struct {
	worker *actor.PID
	n      int
}

func (s *taskSender) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		for i := range s.n {
			ctx.Request(s.worker, &messages.ServiceTask{Session: "s", Task: uint64(i), Attempt: 1, BeatMs: 1000})
		}
	}
}

// Tasks that reach a worker while it closes start no goroutine Close does
// not wait for: Close stops the actor before it waits for the tasks. (It
// waited first, and a task that arrived then raced the wait: the race
// detector saw it in TestServiceInOneSystemDeliversExactlyOnce.)
func TestWorkerCloseWhileTasksArrive(t *testing.T) {
	for range 20 {
		sys := actors.NewSystem()
		w, err := StartWorker(sys, WorkerOptions{Roots: []string{t.TempDir()}, Threads: 1})
		require.NoError(t, err)
		sender := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &taskSender{worker: w.pid, n: 2000} }))
		require.NoError(t, w.Close())
		require.NoError(t, sys.Root.StopFuture(sender).Wait())
		sys.Shutdown()
	}
}
