package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// panicMidGroup panics the first message of kind that when matches, once
// the file reader's goroutine has popped every queued item: it then holds
// a group it has begun and not handed off, and waits in Pop for the rest.
// That is the moment a stage restart stops the goroutine in the middle of
// a group, forced rather than waited for.
type panicMidGroup struct {
	kind  string
	when  func(msg any) bool
	q     *readers.FeedQueue
	fired atomic.Bool
}

func (p *panicMidGroup) BeforeMessage(_, kind string, _ int64, msg any) {
	if kind != p.kind || !p.when(msg) || p.fired.Load() {
		return
	}
	p.fired.Store(true)
	for p.q.Size() > 0 {
		runtime.Gosched()
	}
	panic(fmt.Sprintf("injected panic in %s with a group half read", kind))
}

// A feed queue cannot be read twice: the items a file reader's goroutine
// popped into a group it had not finished when a restart stopped it (its
// own, or the coordinator's, which reassigns it) must still be delivered.
// Before the fix, the group was dropped with its slot and the item popped
// into it was lost: one run in a few hundred, when the restart came while
// the goroutine waited for the group's second item.
func TestQueueItemsSurviveARestartMidGroup(t *testing.T) {
	cases := map[string]struct {
		kind string
		when func(any) bool
	}{
		KindFileReader: {KindFileReader, func(msg any) bool { _, ok := msg.(*poke); return ok }},
		KindFiles: {KindFiles, func(msg any) bool {
			b, ok := msg.(*messages.Batch)
			return ok && b.Count > 0
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testutil.Context(t)
			q, err := readers.NewFeedQueue(4, nil)
			require.NoError(t, err)
			// Groups of two: the first group is items 0 and 1, the second
			// begins with item 2 and waits for item 3.
			for r := range 3 {
				require.NoError(t, q.Push(ctx, testutil.Sample(0, r)))
			}
			inject := &panicMidGroup{kind: tc.kind, when: tc.when, q: q}
			p, err := New([]Stage{Queue{Queue: q}, Batch{Size: 3}}, Options{Faults: inject, GroupSize: 2})
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			const n = 50
			var wg sync.WaitGroup
			wg.Go(func() {
				// The rest comes once the stage restarted: item 3 pushed
				// earlier would complete the group before the fault.
				for p.Stats().Restarts == 0 && ctx.Err() == nil {
					runtime.Gosched()
				}
				for r := 3; r < n; r++ {
					if q.Push(ctx, testutil.Sample(0, r)) != nil {
						return
					}
				}
				q.Close()
			})
			defer wg.Wait()
			got := readQueueValues(t, ctx, p)
			require.True(t, inject.fired.Load(), "the fault fired")
			require.EqualValues(t, 1, p.Stats().Restarts)
			want := make([]int64, n)
			for i := range want {
				want[i] = int64(i)
			}
			require.Equal(t, want, got, "every pushed item, once, in order")
		})
	}
}

// readQueueValues reads a pass and returns the values of its first slot.
func readQueueValues(t *testing.T, ctx context.Context, p *Pipeline) []int64 {
	t.Helper()
	var vals []int64
	for {
		it, err := p.Next(ctx)
		if errors.Is(err, io.EOF) {
			return vals
		}
		require.NoError(t, err)
		v, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		vals = append(vals, v...)
	}
}
