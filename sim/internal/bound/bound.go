// Package bound is how many batches a pipeline may hold live at once, by
// its options and shape: the bound sim's what-if runs and sim/scenario's
// runs check the live batches against.
package bound

import (
	"cmp"

	"github.com/actorfeed/actorfeed/actors"
)

// Lanes is what lanes add to Links: every lane's batch stage but
// the first, and what the merge stage holds, its link's window per lane
// and its unsent batches. Nothing grows with the data: the lanes take
// turns item by item.
func Lanes(o actors.Options, group, batch int) int {
	if o.Lanes <= 1 {
		return 0
	}
	capacity, window := cmp.Or(o.Capacity, 2), cmp.Or(o.Window, 2)
	return (o.Lanes-1)*(capacity+window*((group+batch-1)/batch)) + o.Lanes*window + capacity
}

// Links bounds the live batches of a pipeline of groups of group samples,
// batches of batch, perhaps a multi-pass stage, and devices lanes of a
// double buffer with window prefetch.
func Links(o actors.Options, group, batch int, multiPass bool, devices, prefetch int) int {
	// Options' documented defaults where the caller keeps them.
	capacity, window := cmp.Or(o.Capacity, 2), cmp.Or(o.Window, 2)
	b := capacity + window*((group+batch-1)/batch)
	if multiPass {
		b += capacity + window
	}
	// The lanes, the next pass read ahead, and queued at the devices.
	return b + devices*(2*prefetch+max(prefetch, actors.MinConsumerQueue))
}
