package actors

import (
	"errors"
	"fmt"
)

// Limits on the sizes a pipeline may ask for. A size above its limit is
// ErrBadSpec when the pipeline is built, naming the stage and field: sizes
// are used in arithmetic (windows into groups, queues into channels) that
// must not overflow, and as counts of actors and goroutines that must fit
// the machine. Each limit is far above any useful value.
const (
	// MaxWindow bounds Shuffle.Window, in samples: 64 Mi samples held at
	// once (about 50 GB of 784-byte samples).
	MaxWindow = 1 << 26
	// MaxBatch bounds Batch.Size, in samples.
	MaxBatch = 1 << 24
	// MaxConcurrency bounds the goroutines and actors a stage starts:
	// Files.Threads (also capped at the pieces of work: files or splits),
	// XMap.Workers and Devices.N, and Options.Lanes.
	MaxConcurrency = 1 << 12
	// MaxQueue bounds the items a stage or link may hold: Files.Buffer,
	// XMap.Buffer, DoubleBuffer.Window and Options' GroupSize,
	// ReaderWindow, Capacity and Window.
	MaxQueue = 1 << 16
	// MaxGroupBytes bounds Options.GroupBytes: a group's block is one
	// allocation.
	MaxGroupBytes = 1 << 30
	// MaxPasses bounds MultiPass.Passes: passes are counted in 32 bits
	// across Reset, with room for many Resets.
	MaxPasses = 1 << 20
)

// checkSize fails when v is outside [min, max], naming where and what.
func checkSize(where, what string, v, lo, hi int) error {
	if v < lo {
		return fmt.Errorf("%w: %s: %s %d must be at least %d", ErrBadSpec, where, what, v, lo)
	}
	if v > hi {
		return fmt.Errorf("%w: %s: %s %d is more than the limit %d", ErrBadSpec, where, what, v, hi)
	}
	return nil
}

// validate checks the options' sizes (zero means the default).
func (o *Options) validate() error {
	for _, f := range []struct {
		what string
		v    int
	}{{"GroupSize", o.GroupSize}, {"ReaderWindow", o.ReaderWindow}, {"Capacity", o.Capacity}, {"Window", o.Window}} {
		if err := checkSize("options", f.what, f.v, 0, MaxQueue); err != nil {
			return err
		}
	}
	if err := errors.Join(checkSize("options", "GroupBytes", o.GroupBytes, 0, MaxGroupBytes),
		checkSize("options", "Lanes", o.Lanes, 0, MaxConcurrency), checkSize("options", "Epoch", o.Epoch, 0, MaxEpoch)); err != nil {
		return err
	}
	if o.Epoch != 0 && len(o.Resume) > 0 {
		return fmt.Errorf("%w: options: Epoch %d with Resume: a resumed pipeline starts where its states stand", ErrBadSpec, o.Epoch)
	}
	return o.Shard.check()
}
