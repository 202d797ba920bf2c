package actors

import (
	"testing"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// A data service task is whole items, whole windows where their common
// multiple is not far larger, and at least eight splits.
func TestTaskSpan(t *testing.T) {
	for _, c := range []struct{ window, unit, split, want uint64 }{
		{1024, 64, 1300, 11 * 1024}, // Fashion-MNIST in 1 MiB chunks: 11 windows
		{1024, 64, 10, 1024},        // small chunks: a window
		{64, 1024, 10, 1024},        // a batch of 16 windows
		{50, 16, 3, 208},            // lcm 400 is far larger: 13 batches, about 4 windows
		{1, 6, 1024, 8196},          // unshuffled: eight splits of batches
		{0, 0, 0, 1},
	} {
		got := taskSpan(c.window, c.unit, c.split)
		require.Equal(t, c.want, got, "window %d unit %d split %d", c.window, c.unit, c.split)
		require.Zero(t, got%max(c.unit, 1), "whole items")
		require.GreaterOrEqual(t, got, 8*c.split)
	}
}

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
		sys := NewSystem()
		w, err := StartWorker(sys, WorkerOptions{Roots: []string{t.TempDir()}, Threads: 1})
		require.NoError(t, err)
		sender := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &taskSender{worker: w.pid, n: 2000} }))
		require.NoError(t, w.Close())
		require.NoError(t, sys.Root.StopFuture(sender).Wait())
		sys.Shutdown()
	}
}
