package actors

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A data service task is whole items, whole windows where their common
// multiple is not far larger, and at least eight splits.
func TestTaskSpan(t *testing.T) {
	for _, c := range []struct{ window, unit, split, want uint64 }{
		{1024, 64, 1300, 11 * 1024}, // Fashion-MNIST in 1 MiB chunks: 11 windows
		{1024, 64, 10, 1024},        // small chunks: a window
		{64, 1024, 10, 1024},        // a batch of 16 windows
		{50, 16, 3, 208},            // lcm 400 is far larger: 13 batches, about 4 windows
		{1, 6, 1024, 8196},          // unshuffled: eight splits of batches
		{0, 0, 0, 1},
	} {
		got := taskSpan(c.window, c.unit, c.split)
		require.Equal(t, c.want, got, "window %d unit %d split %d", c.window, c.unit, c.split)
		require.Zero(t, got%max(c.unit, 1), "whole items")
		require.GreaterOrEqual(t, got, 8*c.split)
	}
}
