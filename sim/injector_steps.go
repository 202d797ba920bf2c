package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/pause"
)

// BeforeMessage implements faults.Injector: a stage of the kind a panic
// fault names panics at the messages it strikes. Messages are counted per
// stage across restarts, so a storm (count) strikes count messages in a
// row and a single panic strikes once.
func (in *Injector) BeforeMessage(stage, kind string, _ int64, _ any) {
	now := in.now()
	in.mu.Lock()
	struck := -1
	for i, f := range in.faults {
		if f.Kind != StagePanic || f.Stage != kind || !in.active(i, now) {
			continue
		}
		n, r := in.next(target{fault: i, name: stage}, stage)
		if f.chosen(n, r) && struck < 0 {
			in.fire(i)
			struck = i
		}
	}
	in.mu.Unlock()
	if struck >= 0 {
		panic(fmt.Sprintf("sim: injected panic (fault %d) in %s", struck+1, stage))
	}
}

// stepAction is what the schedule does to one device step.
type stepAction struct {
	stallUntil time.Duration // since the start; 0: none
	crash      bool
	factor     float64
	extra      time.Duration
}

// onStep decides what happens to a step of device dev.
func (in *Injector) onStep(dev int) stepAction {
	now := in.now()
	act := stepAction{factor: 1}
	name := strconv.Itoa(dev)
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, f := range in.faults {
		if !deviceFault(f.Kind) || (len(f.Devices) > 0 && !slices.Contains(f.Devices, dev)) || !in.active(i, now) {
			continue
		}
		if f.Kind == StallDevice && f.At == 0 {
			if end, on := in.stallAt(i, now); on {
				act.stallUntil = max(act.stallUntil, end)
			}
			continue
		}
		n, r := in.next(target{fault: i, name: name}, name)
		switch {
		case f.Kind == SlowDevice:
			act.factor *= max(f.Factor, 1)
			if f.Dist != nil {
				act.extra += f.Dist.Draw(r)
			}
			in.fire(i)
		case !f.chosen(n, r):
		case f.Kind == PanicDevice:
			act.crash = true
			in.fire(i)
		case f.Kind == StallDevice:
			act.stallUntil = max(act.stallUntil, now+f.Length)
			in.fire(i)
		}
	}
	if act.stallUntil > 0 {
		in.stalled[dev] += act.stallUntil - now
		in.delay += act.stallUntil - now
	}
	return act
}

func deviceFault(k FaultKind) bool { return k == SlowDevice || k == StallDevice || k == PanicDevice }

// Step wraps a device step (nil: a step that does nothing) with the
// schedule's device faults: a stalled device waits before its step, a
// crashing one panics (the runtime restarts it and the batch is stepped
// again), and a slow one takes Factor times as long plus a draw of Dist.
func (in *Injector) Step(step actors.StepFunc) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) error {
		dev := actors.DeviceFrom(ctx)
		act := in.onStep(dev)
		if act.crash {
			panic(fmt.Sprintf("sim: injected crash of device %d", dev))
		}
		if act.stallUntil > 0 {
			if err := pause.Sleep(ctx, time.Until(in.start.Add(act.stallUntil))); err != nil {
				return err
			}
		}
		began := time.Now()
		if step != nil {
			if err := step(ctx, it); err != nil {
				return err
			}
		}
		slow := time.Duration(float64(time.Since(began))*(act.factor-1)) + act.extra
		if slow > 0 {
			in.mu.Lock()
			in.delay += slow
			in.mu.Unlock()
		}
		return pause.Sleep(ctx, slow)
	}
}
