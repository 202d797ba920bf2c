package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// A pipeline fed by a queue runs one pass per closing of the queue: Reset
// re-opens it, and the producer pushes the next pass after Reset. Before,
// the double buffer read the third pass ahead from the queue still closed
// by the second's producer, so that pass ended empty and its items were
// left in the queue; a producer that re-opened the queue itself saw them
// handed to the pass after.
func TestQueuePassesAreWhatEachProducerPushed(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		ctx := testutil.Context(t)
		q, err := readers.NewFeedQueue(3, nil)
		require.NoError(t, err)
		sys := actors.NewSystem()
		var mu sync.Mutex
		var got []int64
		p, err := actors.NewDevices([]actors.Stage{actors.Queue{Queue: q}, actors.Batch{Size: 3}, actors.DoubleBuffer{Window: 2}},
			actors.Devices{N: 2, Step: func(_ context.Context, it actors.Item) error {
				v, err := tensor.View[int64](it.Slots[0].Tensor)
				mu.Lock()
				got = append(got, v...)
				mu.Unlock()
				return err
			}}, actors.Options{System: sys, GroupSize: 2})
		require.NoError(t, err)
		for pass, n := range []int{10, 7, 0, 12, 5} {
			if pass > 0 {
				if reopen { // as a producer may, before the trainer's Reset
					q.ReOpen()
				}
				require.NoError(t, p.Reset())
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				for r := range n {
					require.NoError(t, q.Push(ctx, testutil.Sample(pass, r)))
				}
				q.Close()
			})
			require.NoError(t, p.Run(ctx))
			wg.Wait()
			mu.Lock()
			want := make([]int64, n)
			for r := range want {
				want[r] = int64(pass*1_000_000 + r)
			}
			require.ElementsMatch(t, want, got, "pass %d (the producer re-opened the queue: %v)", pass, reopen)
			got = got[:0]
			mu.Unlock()
		}
		closeAndCheck(t, p, sys)
	}
}

// A queue cannot be read twice, so a multi-pass stage over one, whose
// second pass would read the closed queue's end, is refused.
func TestMultiPassOverAQueueIsRefused(t *testing.T) {
	q, err := readers.NewFeedQueue(3, nil)
	require.NoError(t, err)
	_, err = actors.New([]actors.Stage{actors.Queue{Queue: q}, actors.MultiPass{Passes: 2}}, actors.Options{})
	require.ErrorIs(t, err, actors.ErrBadSpec)
	require.ErrorContains(t, err, "feed queue cannot be read more than once")
}

// A producer that pauses (an evaluation between steps, a slow upstream)
// is not a stalled read: the read timeout bounds reads of files, and a
// queue's reader waits for its producer as long as the pipeline runs.
// Before, a pause longer than the timeout's retries failed the pipeline
// with a stalled read of "feed queue".
func TestQueueWaitsForAPausedProducer(t *testing.T) {
	ctx := testutil.Context(t)
	q, err := readers.NewFeedQueue(2, nil)
	require.NoError(t, err)
	sys := actors.NewSystem()
	const timeout = 5 * time.Millisecond
	p, err := actors.New([]actors.Stage{actors.Queue{Queue: q}}, actors.Options{System: sys, GroupSize: 1, ReadTimeout: timeout,
		Retry: supervisor.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 2}})
	require.NoError(t, err)
	first := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		require.NoError(t, q.Push(ctx, testutil.Sample(0, 0)))
		<-first
		// The pause is what is tested: ten times what the reader's
		// timeout and retries allow a read.
		time.Sleep(10 * 3 * timeout)
		require.NoError(t, q.Push(ctx, testutil.Sample(0, 1)))
		q.Close()
	})
	var vals []int64
	readPass(t, ctx, p, func(it actors.Item) {
		v, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		if vals = append(vals, v...); len(vals) == 1 {
			close(first)
		}
	})
	wg.Wait()
	require.Equal(t, []int64{0, 1}, vals)
	closeAndCheck(t, p, sys)
}

// A producer that re-opens the queue, pushes a pass that fits in it and
// closes it, all before the trainer's Reset, has that pass read. Reset
// re-opened a closed queue whatever closed it: it dropped such a pass's
// items, or, with none, its end, so that the pass never ended (a sim
// scenario's reference run hung so under load, one run in a few).
func TestAPassPushedBeforeResetIsRead(t *testing.T) {
	ctx := testutil.Context(t)
	q, err := readers.NewFeedQueue(4, nil)
	require.NoError(t, err)
	sys := actors.NewSystem()
	var mu sync.Mutex
	var got []int64
	p, err := actors.NewDevices([]actors.Stage{actors.Queue{Queue: q}, actors.Batch{Size: 3}, actors.DoubleBuffer{Window: 2}},
		actors.Devices{N: 1, Step: func(_ context.Context, it actors.Item) error {
			v, err := tensor.View[int64](it.Slots[0].Tensor)
			mu.Lock()
			got = append(got, v...)
			mu.Unlock()
			return err
		}}, actors.Options{System: sys, GroupSize: 2})
	require.NoError(t, err)
	for pass, n := range []int{2, 0, 3, 4, 0} {
		if pass > 0 {
			q.ReOpen()
		}
		for r := range n {
			require.NoError(t, q.Push(ctx, testutil.Sample(pass, r)))
		}
		q.Close()
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		run, cancel := context.WithTimeout(ctx, 30*time.Second) // a pass that never ends fails, not hangs
		require.NoError(t, p.Run(run), "pass %d", pass)
		cancel()
		want := make([]int64, n)
		for r := range want {
			want[r] = int64(pass*1_000_000 + r)
		}
		mu.Lock()
		require.ElementsMatch(t, want, got, "pass %d", pass)
		got = got[:0]
		mu.Unlock()
	}
	closeAndCheck(t, p, sys)
}
