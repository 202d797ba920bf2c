package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
)

// consumerCell is what a consumer (the pipeline handle's sink, or a device)
// persists: its link, the items received and not yet consumed, and the
// count consumed. Items are consumed outside the actor (by Next, or by the
// device's goroutine) under mu, and the count advances the moment an item
// is consumed, so a restart neither loses nor repeats one.
type consumerCell struct {
	cell
	lane  uint32
	lanes uint32 // consumers of the pipeline: item k of a pass goes to lane k mod lanes
	in    protocol.Inlet
	self  *actor.PID

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	queue     []*messages.Batch
	consumed  uint64 // items consumed this pass
	unnoticed int    // consumed and not yet told to the actor (notify)
	end       *messages.End
	failed    error
	pass      uint32
	stepGen   uint64 // the device loop that may commit: a loop abandoned by a stop never does
}

func newConsumerCell(pipe *shared, name, kind string, lane, lanes uint32, window int) *consumerCell {
	c := &consumerCell{cell: cell{name: name, kind: kind, pipe: pipe}, lane: lane, lanes: lanes, changed: make(chan struct{})}
	c.in.Lane = lane // a consumer of several names its lane when it subscribes
	c.in.Window = int64(window)
	return c
}

// notify tells the actor items left the queue, once that can make it ask
// for more: the inlet asks in steps of half its window (Inlet.Replenish).
// A queue that ran dry needs no message of its own: when the actor last
// held back its demand, more than half a window was queued, so the device
// consumed at least one half-window since, and the last notice of it came
// with less than half a window left in the queue: room for a step. mu must
// be held.
func (c *consumerCell) notify() {
	c.unnoticed++
	if c.unnoticed >= int(c.in.Step()) {
		c.unnoticed = 0
		c.pipe.root.Send(c.self, consumedMsg{})
	}
}

// signal wakes the waiters; mu must be held.
func (c *consumerCell) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// take waits for the next item of the pass and consumes it. It returns
// (nil, nil) at the end of the pass.
func (c *consumerCell) take(ctx context.Context) (*messages.Batch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, err := c.waitLocked(ctx)
	if err != nil || !ok {
		return nil, err
	}
	return c.popLocked(), nil
}

// popLocked consumes the head of the queue; mu must be held.
func (c *consumerCell) popLocked() *messages.Batch {
	b := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	c.consumed++
	c.meter.items.Add(1)
	c.meter.held.Store(int64(len(c.queue)))
	c.pipe.noteConsumed(b)
	c.pipe.commits.commit(c.pass, c.seqOf(b), b)
	c.notify()
	return b
}

// passOf is the pass the consumer reads.
func (c *consumerCell) passOf() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pass
}

// peek reports whether an item of the pass is ready or coming, waiting as
// take does but consuming nothing.
func (c *consumerCell) peek(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waitLocked(ctx)
}

// waitLocked waits, with mu held (released while waiting), until an item is
// queued (true), the pass ended (false) or the pipeline or ctx failed.
func (c *consumerCell) waitLocked(ctx context.Context) (bool, error) {
	for {
		if err := c.pipe.terminal(); err != nil {
			return false, err
		}
		if c.failed != nil {
			return false, c.failed
		}
		if len(c.queue) > 0 {
			return true, nil
		}
		if c.end != nil {
			return false, nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			c.mu.Lock()
			return false, context.Cause(ctx)
		case <-ch:
		case <-c.pipe.done:
		}
		c.mu.Lock()
	}
}

// consumedMsg tells a consumer actor an item left its queue: time to ask
// for more.
type consumedMsg struct{}

// restartPass tells a consumer to read pass from its start.
type restartPass struct{ pass uint32 }

type consumerActor struct {
	c      *consumerCell
	device *deviceRun // nil for the handle's sink
	steps  task
}

func (a *consumerActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() {
		c.mu.Lock()
		held := len(c.queue)
		c.mu.Unlock()
		c.meter.gauge(held, c.in.Outstanding)
	}()
	msg, box := c.receive(ctx)
	defer c.post()
	switch m := msg.(type) {
	case *actor.Started:
		a.onStarted(ctx, box)
		return
	case *actor.Stopping, *actor.Restarting:
		a.stopDevice()
		return
	case *crashed:
		panic(m.reason)
	case restartPass:
		if c.in.Open && c.in.Pass == m.pass {
			return // opened already, by a restart that found the pass begun
		}
		a.open(box, m.pass)
	case consumedMsg:
	case *messages.Resubscribe:
		c.in.Reopen(box, a.room())
		return
	case *messages.Batch:
		if !c.in.Admit(box, m.Epoch, m.Seq, a.room()) {
			return
		}
		c.in.Commit()
		c.mu.Lock()
		if m.Pass == c.pass {
			c.queue = append(c.queue, m)
			c.signal()
		}
		c.mu.Unlock()
	case *messages.End:
		a.onEnd(box, m)
		return
	case *messages.Failure:
		a.onFailure(m)
		return
	default:
		return
	}
	c.mu.Lock()
	ack := c.consumed
	c.mu.Unlock()
	c.in.Replenish(box, a.room(), ack)
}

// onStarted opens the link for the current pass: from its start on a first
// start, where it was on a restart.
func (a *consumerActor) onStarted(ctx actor.Context, box *protocol.Outbox) {
	c := a.c
	if c.restarted() {
		c.mu.Lock()
		pass := c.pass
		c.mu.Unlock()
		if c.in.Open && c.in.Pass != pass {
			// Reset began a pass whose restartPass this instance never
			// handled: the message that failed may have been it.
			a.open(box, pass)
		} else {
			c.in.Reopen(box, a.room())
		}
	} else {
		a.open(box, 0)
	}
	a.startDevice(ctx)
}

// onEnd takes the end of a pass: the current one ends once its queue is
// consumed.
func (a *consumerActor) onEnd(box *protocol.Outbox, m *messages.End) {
	c := a.c
	if !c.in.AdmitEnd(box, m, a.room()) {
		return
	}
	c.in.Ended = true
	c.mu.Lock()
	current := m.Pass == c.pass
	c.mu.Unlock()
	if !current {
		return
	}
	// The pipeline notes the end (Stats.Skipped) before a reader of Next
	// can see it: one who reads Stats after io.EOF reads the pass's.
	c.pipe.passEnded(c.name, m)
	c.mu.Lock()
	if m.Pass == c.pass {
		c.end = m
		c.signal()
	}
	c.mu.Unlock()
}

// onFailure ends the pipeline with the upstream's failure.
func (a *consumerActor) onFailure(m *messages.Failure) {
	c := a.c
	if !c.in.Current(m.Epoch) {
		return
	}
	c.in.Ended = true
	err := c.pipe.stageError(m)
	c.mu.Lock()
	c.failed = err
	c.signal()
	c.mu.Unlock()
	c.pipe.fail(err)
}

// beginPass forgets the current pass: what is queued is dropped and items
// of any other pass are refused from now on.
func (c *consumerCell) beginPass(pass uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.queue {
		c.pipe.noteDropped(b)
	}
	c.queue, c.consumed, c.end, c.failed, c.pass = nil, 0, nil, nil, pass
	c.signal()
}

// open subscribes for pass from its beginning.
func (a *consumerActor) open(box *protocol.Outbox, pass uint32) {
	a.c.beginPass(pass)
	a.c.in.Subscribe(box, pass, 0, a.room())
}

// room is the window less what waits in the queue.
func (a *consumerActor) room() int {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.in.Window) - len(c.queue)
}

// StepFunc is a device's training step on one batch. It runs on the
// device's own goroutine and must return soon after ctx is cancelled. A
// step that returns an error ends the pipeline with it; one that panics
// restarts the device, and the batch is stepped again.
type StepFunc func(ctx context.Context, item Item) error

type deviceKey struct{}

// DeviceFrom returns the index of the device whose step ctx was passed to;
// -1 outside a step.
func DeviceFrom(ctx context.Context) int {
	if d, ok := ctx.Value(deviceKey{}).(int); ok {
		return d
	}
	return -1
}

// deviceRun is a device's step loop and its statistics.
type deviceRun struct {
	step     StepFunc
	stepTime time.Duration
	stats    *deviceCounter
}

func (a *consumerActor) startDevice(ctx actor.Context) {
	if a.device == nil {
		return
	}
	c := a.c
	c.mu.Lock()
	c.stepGen++
	gen := c.stepGen
	c.mu.Unlock()
	a.steps.start(ctx, context.WithValue(context.Background(), deviceKey{}, int(c.lane)), func(ctx context.Context) { a.runDevice(ctx, gen) })
}

// stopDevice cancels the device's loop and waits for its step to return, at
// most Options.StopGrace: a step that ignores its ctx is abandoned (and
// reported by Close), so that neither Close nor a restart hangs on it. An
// abandoned step that returns later commits nothing: the batch is stepped
// again by the device's next loop, if any.
func (a *consumerActor) stopDevice() {
	c := a.c
	if a.steps.stopWithin(c.pipe.opts.StopGrace) {
		return
	}
	c.mu.Lock()
	c.stepGen++
	c.mu.Unlock()
	c.pipe.abandon(fmt.Sprintf("device %d's step", c.lane))
}

// runDevice steps batches as they come, timing the wait for data and the
// step. A batch counts as consumed only once its step returned.
func (a *consumerActor) runDevice(ctx context.Context, gen uint64) {
	c, d := a.c, a.device
	for {
		waitFrom := time.Now()
		b, pass, err := c.waitHead(ctx)
		if err != nil {
			return
		}
		if !c.pipe.budget.take(ctx) {
			return // the devices stepped Devices.Steps batches: no more
		}
		start := time.Now()
		item, err := c.toItem(b)
		if err == nil {
			if d.step != nil {
				err = d.step(ctx, item)
			} else if d.stepTime > 0 {
				t := time.NewTimer(d.stepTime)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		// A step that returned nil consumed the batch, even if the device is
		// being stopped: it is committed, never stepped again.
		if err != nil {
			c.pipe.budget.done(false)
			if ctx.Err() != nil {
				return
			}
			c.pipe.fail(&StageError{Stage: c.name, Offset: -1, Record: -1, Class: Classify(err), Err: err})
			return
		}
		busy := time.Since(start)
		// The statistics count the batch before the commit can be seen, so
		// Run, which returns once every batch is committed, never returns
		// with the last one uncounted.
		committed := c.commitHead(b, pass, gen, func() { d.stats.add(start.Sub(waitFrom), busy, item.Instances) })
		c.pipe.budget.done(committed)
		if !committed {
			if ctx.Err() != nil {
				return // abandoned by a stop: this loop is over
			}
			continue // the pass was restarted under the step: not consumed
		}
		// Committed, the batch is never stepped or sent again: its storage
		// is free once the step let go of it.
		c.pipe.recycle(item.Slots)
	}
}

// waitHead waits for the first queued item without removing it, across
// pass ends: at the end of a pass it waits for the next pass (Reset) to
// bring items. It decides under one hold of mu, so an item and an end that
// both arrive while it looks cannot leave it waiting for a change that
// already happened.
func (c *consumerCell) waitHead(ctx context.Context) (*messages.Batch, uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		ok, err := c.waitLocked(ctx)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return c.queue[0], c.pass, nil
		}
		// The pass ended with everything consumed: wait for another pass.
		for pass := c.pass; c.pass == pass && len(c.queue) == 0 && c.end != nil; {
			ch := c.changed
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				c.mu.Lock()
				return nil, 0, context.Cause(ctx)
			case <-ch:
			case <-c.pipe.done:
			}
			c.mu.Lock()
			if err := c.pipe.terminal(); err != nil {
				return nil, 0, err
			}
		}
	}
}

// commitHead consumes b if it is still the head of the same pass and the
// loop of generation gen still owns the device, calling counted first.
func (c *consumerCell) commitHead(b *messages.Batch, pass uint32, gen uint64, counted func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 || c.queue[0] != b || c.pass != pass || c.stepGen != gen {
		return false
	}
	counted()
	c.popLocked()
	c.signal()
	if len(c.queue) == 0 { // Run waits for every device to be idle
		c.pipe.changed()
	}
	return true
}
