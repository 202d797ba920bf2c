package actors

import (
	"context"
	"runtime"
)

// WaitReading returns once a Next or HasNext call is in flight on p.
func WaitReading(ctx context.Context, p *Pipeline) {
	for ctx.Err() == nil {
		p.mu.Lock()
		n := p.inflight
		p.mu.Unlock()
		if n > 0 {
			return
		}
		runtime.Gosched()
	}
}

// OrderSpan is the positions a window of p's order spans.
func OrderSpan(p *Pipeline) int { return p.order.Ord.Span() }
