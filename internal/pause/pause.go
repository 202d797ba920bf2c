// Package pause waits for a duration or a context, whichever ends first:
// the one way the file readers' backoff, the simulator's injected delays
// and its scenarios' slow devices wait.
package pause

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends and returns its error. It does not
// wait, nor look at ctx, for a d of zero or less.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
