package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// consumedCounter counts the consumedMsg a device's goroutine sends its
// actor.
type consumedCounter struct{ n atomic.Int64 }

func (c *consumedCounter) BeforeMessage(_, kind string, _ int64, msg any) {
	if _, ok := msg.(consumedMsg); ok && kind == KindDevice {
		c.n.Add(1)
	}
}

// A device behind a double buffer tells its actor what it consumed in
// steps of half its queue (MinConsumerQueue), not after every step, even
// when it is faster than the pipeline and its queue runs dry after each
// step; and it still gets every batch.
func TestDeviceTellsItsActorTwoBatchesAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const batches = 200
	items := make([]tensor.Slots, batches)
	for i := range items {
		items[i] = tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(i)})}}
	}
	var counted consumedCounter
	var stepped atomic.Int64
	p, err := NewDevices([]Stage{Generator{Name: "items", New: func() (readers.Reader, error) { return readers.FromSlice(items), nil }},
		Batch{Size: 1}, DoubleBuffer{}}, Devices{N: 1, Step: func(context.Context, Item) error {
		stepped.Add(1)
		return nil
	}}, Options{Faults: &counted})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.NoError(t, p.Run(ctx))
	require.Equal(t, int64(batches), stepped.Load())
	// One message per two batches (MinConsumerQueue/2); a queue of 2 sent
	// one per batch.
	require.LessOrEqual(t, counted.n.Load(), int64(batches/2))
	require.Positive(t, counted.n.Load())
}
