// Package ticker sends a message to an actor at every interval: the data
// service's client and workers tick their leases and heartbeats by it.
package ticker

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Ticker sends msg to an actor every interval, from a goroutine of its
// own, until stopped. protoactor's scheduler.SendRepeatedly reads its
// timer's state without the atomic it writes it with: the race detector
// reported that race when a worker stopped as its tick fired.
type Ticker struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// Start starts sending msg to pid every interval through sender.
func Start(sender actor.SenderContext, every time.Duration, pid *actor.PID, msg any) *Ticker {
	t := &Ticker{done: make(chan struct{})}
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

// Stop ends the ticks and waits for the goroutine, which is at most one
// Send away from noticing. A nil Ticker, or a stopped one, is left alone;
// the actor that owns it calls Stop from its own goroutine only.
func (t *Ticker) Stop() {
	if t == nil || t.done == nil {
		return
	}
	close(t.done)
	t.wg.Wait()
	t.done = nil
}
