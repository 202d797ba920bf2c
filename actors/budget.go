package actors

import (
	"context"
	"sync"
)

// stepBudget is Devices.Steps: how many batches the devices step in all
// before they stop. A device takes a step from it before stepping, and
// gives it back when the batch is not consumed (its step failed, or the
// pass was restarted under it); once every step taken was committed, the
// budget is spent and Run returns.
type stepBudget struct {
	mu        sync.Mutex
	max       int
	taken     int
	committed int
	spent     chan struct{} // closed when committed reaches max
}

func newStepBudget(max int) *stepBudget {
	if max <= 0 {
		return nil
	}
	return &stepBudget{max: max, spent: make(chan struct{})}
}

// take reserves a step; false when none is left: the device waits for ctx
// to end, stepping nothing more.
func (b *stepBudget) take(ctx context.Context) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	ok := b.taken < b.max
	if ok {
		b.taken++
	}
	b.mu.Unlock()
	if !ok {
		<-ctx.Done()
	}
	return ok
}

// done ends a reserved step: committed, or given back.
func (b *stepBudget) done(committed bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !committed {
		b.taken--
		return
	}
	if b.committed++; b.committed == b.max {
		close(b.spent)
	}
}

// isSpent says whether every step of the budget was committed.
func (b *stepBudget) isSpent() bool {
	if b == nil {
		return false
	}
	select {
	case <-b.spent:
		return true
	default:
		return false
	}
}

// spentCh is closed when the budget is spent; nil (never) without one.
func (b *stepBudget) spentCh() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.spent
}
