package readers_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// awaitBlocked returns once n goroutines are blocked in q. It waits on a
// condition the queue reports, not on time.
func awaitBlocked(q *readers.FeedQueue, n int) {
	for readers.QueueWaiters(q) < n {
		runtime.Gosched()
	}
}

// recv takes the result of a blocked call, failing the test instead of
// hanging if the call is never released.
func recv(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(testutil.Deadline):
		t.Fatal("a blocked call was never released")
		return nil
	}
}

// Upstream: a push blocked on a full capacity-2 queue fails on Close, and the
// 2 queued items stay readable.
func TestQueueBlockedPushFailsOnClose(t *testing.T) {
	q, err := readers.NewFeedQueue(2, nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, q.Push(ctx, item(1)))
	require.NoError(t, q.Push(ctx, item(2)))
	assert.True(t, q.Full())
	assert.Equal(t, 2, q.Size())

	blocked := make(chan error, 1)
	go func() { blocked <- q.Push(ctx, item(3)) }()
	awaitBlocked(q, 1)
	q.Close()
	require.ErrorIs(t, recv(t, blocked), readers.ErrQueueClosed)

	for want := int64(1); want <= 2; want++ {
		it, err := q.Pop(ctx)
		require.NoError(t, err)
		assert.Equal(t, []int64{want}, values(t, []tensor.Slots{it}))
	}
	_, err = q.Pop(ctx)
	assert.ErrorIs(t, err, io.EOF)
	assert.True(t, q.Empty())
	assert.ErrorIs(t, q.Push(ctx, item(4)), readers.ErrQueueClosed)
}

func TestQueueManyProducersAndConsumersLoseNothing(t *testing.T) {
	q, err := readers.NewFeedQueue(3, nil)
	require.NoError(t, err)
	const producers, perProducer, consumers = 4, 500, 3
	ctx := context.Background()
	var prod sync.WaitGroup
	for p := range producers {
		prod.Go(func() {
			for i := range perProducer {
				if err := q.Push(ctx, item(int64(p*perProducer+i))); err != nil {
					t.Errorf("push: %v", err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	var got []int64
	var cons sync.WaitGroup
	for range consumers {
		cons.Go(func() {
			r := readers.NewQueueReader(q)
			for it, err := range readers.All(ctx, r) {
				if err != nil {
					t.Errorf("pop: %v", err)
					return
				}
				mu.Lock()
				got = append(got, values(t, []tensor.Slots{it})...)
				mu.Unlock()
			}
		})
	}
	prod.Wait()
	q.Close()
	cons.Wait()
	slices.Sort(got)
	assert.Equal(t, seq(0, producers*perProducer-1), got)
}

func TestQueueKillReachesTheConsumer(t *testing.T) {
	q, err := readers.NewFeedQueue(4, nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, q.Push(ctx, item(1)))
	popped := make(chan error, 1)
	q2, _ := readers.NewFeedQueue(1, nil)
	go func() { _, err := q2.Pop(ctx); popped <- err }()
	awaitBlocked(q2, 1)
	cause := errors.New("producer: bad file")
	q.Kill(cause)
	q2.Kill(cause)
	_, err = q.Pop(ctx)
	require.ErrorIs(t, err, readers.ErrQueueKilled)
	require.ErrorIs(t, err, cause)
	require.ErrorIs(t, recv(t, popped), cause, "a blocked Pop is woken with the cause")
	assert.ErrorIs(t, q.Push(ctx, item(2)), readers.ErrQueueKilled)

	q.ReOpen()
	require.NoError(t, q.Push(ctx, item(5)))
	it, err := q.Pop(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int64{5}, values(t, []tensor.Slots{it}))
}

// ReOpenClosed opens only a closed queue that no one re-opened since the
// count it is given: an open queue keeps what a producer pushed, a killed
// one stays killed, and one a producer re-opened, filled and closed again
// keeps its items and its close, which are the next pass's.
func TestQueueReOpenClosedTouchesOnlyAClosedQueue(t *testing.T) {
	ctx := context.Background()
	q, err := readers.NewFeedQueue(4, nil)
	require.NoError(t, err)
	require.NoError(t, q.Push(ctx, item(1)))
	since := q.ReOpenClosed(q.Opened())
	assert.Equal(t, 1, q.Size(), "an open queue keeps its items")
	q.Close()
	require.ErrorIs(t, q.Push(ctx, item(2)), readers.ErrQueueClosed)
	since = q.ReOpenClosed(since)
	assert.Equal(t, 0, q.Size(), "a closed queue is emptied, as ReOpen does")
	require.NoError(t, q.Push(ctx, item(3)))
	q.Close()
	q.ReOpen() // a producer's, for its next pass
	require.NoError(t, q.Push(ctx, item(4)))
	q.Close()
	since = q.ReOpenClosed(since)
	assert.Equal(t, 1, q.Size(), "the producer's pass stays")
	require.ErrorIs(t, q.Push(ctx, item(5)), readers.ErrQueueClosed, "and so does its close")
	q.ReOpenClosed(since)
	require.NoError(t, q.Push(ctx, item(6)))
	q.Kill(nil)
	q.ReOpenClosed(q.Opened())
	_, err = q.Pop(ctx)
	require.ErrorIs(t, err, readers.ErrQueueKilled)
}

func TestQueueHonoursContext(t *testing.T) {
	q, err := readers.NewFeedQueue(1, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := q.Pop(ctx); done <- err }()
	awaitBlocked(q, 1)
	cancel()
	assert.ErrorIs(t, recv(t, done), context.Canceled)
	require.NoError(t, q.Push(context.Background(), item(1)))
	assert.ErrorIs(t, q.Push(ctx, item(2)), context.Canceled)
}

func TestQueueChecksDeclaredDims(t *testing.T) {
	specs := []readers.SlotSpec{{Name: "image", Shape: tensor.Shape{-1, 4}, DType: tensor.Float32}}
	q, err := readers.NewFeedQueue(2, specs)
	require.NoError(t, err)
	ctx := context.Background()
	good := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{2, 4}, make([]float32, 8))}}
	require.NoError(t, q.Push(ctx, good))
	bad := tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{2, 3}, make([]float32, 6))}}
	err = q.Push(ctx, bad)
	require.ErrorIs(t, err, tensor.ErrShape)
	assert.ErrorContains(t, err, `slot 0 (image)`)
	assert.ErrorContains(t, err, "[2,3]")
	assert.ErrorContains(t, err, "[-1,4]")
	assert.ErrorIs(t, q.Push(ctx, item(1)), tensor.ErrDType)
	assert.Equal(t, 1, q.Size())
	_, err = readers.NewFeedQueue(0, nil)
	assert.Error(t, err)
}

func TestQueueHolderInitOnceAndReaderRefusesReset(t *testing.T) {
	var h readers.FeedQueueHolder
	_, err := readers.NewHolderReader(&h)
	require.ErrorIs(t, err, readers.ErrNotInitialized)
	q, err := h.InitOnce(2, nil)
	require.NoError(t, err)
	assert.Same(t, q, h.Queue())
	_, err = h.InitOnce(2, nil)
	require.ErrorIs(t, err, readers.ErrAlreadyInitialized)

	r, err := readers.NewHolderReader(&h)
	require.NoError(t, err)
	require.NoError(t, q.Push(context.Background(), item(1)))
	it, err := r.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, values(t, []tensor.Slots{it}))
	err = r.Reset()
	require.ErrorIs(t, err, readers.ErrResetUnsupported)
	assert.ErrorContains(t, err, "feed queue")
	// Closing the reader releases producers.
	require.NoError(t, r.Close())
	assert.ErrorIs(t, q.Push(context.Background(), item(2)), readers.ErrQueueClosed)
}

// A feed queue behind a buffered decorator: a producer's error reaches the
// consumer through the prefetch goroutine.
func TestQueueKillThroughBuffered(t *testing.T) {
	q, err := readers.NewFeedQueue(2, nil)
	require.NoError(t, err)
	r := readers.Buffered(readers.NewQueueReader(q), 2)
	cause := errors.New("producer crashed")
	go func() {
		for i := range 5 {
			if err := q.Push(context.Background(), item(int64(i))); err != nil {
				return
			}
		}
		q.Kill(cause)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
	defer cancel()
	var n int
	var got error
	for _, err := range readers.All(ctx, r) {
		if err != nil {
			got = err
			break
		}
		n++
	}
	require.ErrorIs(t, got, cause, "the producer's error must reach the consumer, not an end")
	assert.LessOrEqual(t, n, 5)
	require.NoError(t, r.Close())
}
