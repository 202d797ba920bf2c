package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ticker sends msg to an actor every interval, from a goroutine of its
// own, until stopped. protoactor's scheduler.SendRepeatedly reads its
// timer's state without the atomic it writes it with: the race detector
// reported that race when a worker stopped as its tick fired.
type ticker struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// startTicker starts sending msg to pid every interval through sender.
func startTicker(sender actor.SenderContext, every time.Duration, pid *actor.PID, msg any) *ticker {
	t := &ticker{done: make(chan struct{})}
	tk := time.NewTicker(every)
	t.wg.Go(func() {
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				sender.Send(pid, msg)
			case <-t.done:
				return
			}
		}
	})
	return t
}

// stop ends the ticks and waits for the goroutine, which is at most one
// Send away from noticing. A nil ticker, or a stopped one, is left alone;
// the actor that owns it calls stop from its own goroutine only.
func (t *ticker) stop() {
	if t == nil || t.done == nil {
		return
	}
	close(t.done)
	t.wg.Wait()
	t.done = nil
}
