package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/messages"
)

// Errors of the checks a trainer's own tests run.
var (
	// ErrNotExactlyOnce is wrapped by Ledger.Check when a sample was
	// consumed twice in an epoch, one was consumed that should not have
	// been, or more went missing than the tolerance allows.
	ErrNotExactlyOnce = errors.New("sim: not exactly once")
	// ErrLeak is wrapped by LeakCheck.Check when goroutines or actors
	// outlive the pipeline.
	ErrLeak = errors.New("sim: leak")
)

// Ledger records the samples a pipeline's devices consumed, per epoch of
// the order (actors.Item.Epoch), for the exactly-once check. It is safe
// for concurrent use.
type Ledger struct {
	mu     sync.Mutex
	epochs map[int]map[uint64]int // epoch -> id -> times consumed
	n      int
}

// Step wraps a device step (nil: none) so that every batch it steps
// without error is recorded; a batch whose step fails or panics is not,
// since the runtime steps it again.
func (l *Ledger) Step(step actors.StepFunc) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) error {
		if step != nil {
			if err := step(ctx, it); err != nil {
				return err
			}
		}
		l.Record(it)
		return nil
	}
}

// Record records a consumed batch.
func (l *Ledger) Record(it actors.Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epochs == nil {
		l.epochs = map[int]map[uint64]int{}
	}
	ids := l.epochs[it.Epoch]
	if ids == nil {
		ids = map[uint64]int{}
		l.epochs[it.Epoch] = ids
	}
	for _, id := range it.IDs[:len(it.IDs)-it.Padding] {
		ids[id]++
	}
	l.n += len(it.IDs) - it.Padding
}

// Samples is how many samples were recorded, padding left out.
func (l *Ledger) Samples() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Tolerance is what Check lets pass.
type Tolerance struct {
	// Missing is how many samples may be missing in all epochs: the
	// corrupt records the skip policy skipped (actors.Stats.Skipped, summed
	// over the passes).
	Missing int
	// Tail is how many samples per epoch may differ from the reference's
	// either way: a batch's worth where which samples fall in a dropped
	// last batch depends on timing (drop_last in any order, drop_partial).
	Tail int
}

// Check compares l with ref, a ledger of the same pipeline run without
// faults: in every epoch of ref, each sample consumed at most once, none
// that ref did not consume, and no more missing than tol allows. It
// returns nil or an error wrapping ErrNotExactlyOnce that says what
// differs.
func (l *Ledger) Check(ref *Ledger, tol Tolerance) error {
	if msgs := l.diff(ref).violations(tol); len(msgs) > 0 {
		return fmt.Errorf("%w: %s", ErrNotExactlyOnce, msgs[0])
	}
	return nil
}

// Missing is how many of ref's samples l lacks, in all epochs.
func (l *Ledger) Missing(ref *Ledger) int { return l.diff(ref).lost() }

// ledgerDiff is how a ledger differs from a reference.
type ledgerDiff struct {
	stray  []int // epochs the reference does not have
	epochs []epochDiff
}

// epochDiff is how one epoch differs: samples consumed more often than the
// reference did (and more than once), samples it never consumed, and how
// many of its consumptions are missing.
type epochDiff struct {
	epoch        int
	twice, extra []string
	lost         int
}

// diff compares l with ref, epoch by epoch.
func (l *Ledger) diff(ref *Ledger) ledgerDiff {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref.mu.Lock()
	defer ref.mu.Unlock()
	var d ledgerDiff
	for _, e := range slices.Sorted(maps.Keys(l.epochs)) {
		if _, ok := ref.epochs[e]; !ok {
			d.stray = append(d.stray, e)
		}
	}
	for _, e := range slices.Sorted(maps.Keys(ref.epochs)) {
		got, want := l.epochs[e], ref.epochs[e]
		ed := epochDiff{epoch: e}
		for _, id := range slices.Sorted(maps.Keys(got)) {
			switch {
			case got[id] > max(want[id], 1):
				ed.twice = append(ed.twice, idString(id))
			case want[id] == 0:
				ed.extra = append(ed.extra, idString(id))
			}
		}
		for id, c := range want {
			ed.lost += max(c-got[id], 0)
		}
		d.epochs = append(d.epochs, ed)
	}
	return d
}

// lost is how many of the reference's consumptions are missing.
func (d ledgerDiff) lost() int {
	n := 0
	for _, ed := range d.epochs {
		n += ed.lost
	}
	return n
}

// violations lists what differs beyond tol.
func (d ledgerDiff) violations(tol Tolerance) []string {
	var msgs []string
	for _, e := range d.stray {
		msgs = append(msgs, fmt.Sprintf("epoch %d: consumed, but the reference run has no such epoch", e))
	}
	missing := 0
	for _, ed := range d.epochs {
		missing += max(ed.lost-tol.Tail, 0)
		if len(ed.twice) > 0 {
			msgs = append(msgs, fmt.Sprintf("epoch %d: %d samples consumed more than once: %v", ed.epoch, len(ed.twice), head(ed.twice)))
		}
		if len(ed.extra) > tol.Tail {
			msgs = append(msgs, fmt.Sprintf("epoch %d: %d samples the reference run did not consume: %v", ed.epoch, len(ed.extra), head(ed.extra)))
		}
	}
	if missing > tol.Missing {
		msgs = append(msgs, fmt.Sprintf("%d samples missing, %d may be (skipped records)", missing, tol.Missing))
	}
	return msgs
}

func idString(id uint64) string {
	f, r := messages.SplitID(id)
	return fmt.Sprintf("%d#%d", f, r)
}

// LeakCheck finds goroutines and actors that outlive a pipeline: take one
// before building it, and Check after closing it.
type LeakCheck struct {
	before goleak.Option
}

// NewLeakCheck notes the goroutines running now, which Check ignores.
func NewLeakCheck() LeakCheck { return LeakCheck{before: goleak.IgnoreCurrent()} }

// Check returns an error wrapping ErrLeak when goroutines started since
// NewLeakCheck still run (it waits for them a while, as goleak does), or
// when sys (if not nil) still has actors in its registry.
func (c LeakCheck) Check(sys *actor.ActorSystem) error {
	var errs []error
	if sys != nil {
		if left := registered.Actors(sys); len(left) > 0 {
			sort.Strings(left)
			errs = append(errs, fmt.Errorf("%w: actors left in the registry: %v", ErrLeak, head(left)))
		}
	}
	if err := goleak.Find(c.before); err != nil {
		errs = append(errs, fmt.Errorf("%w: goroutines left: %v", ErrLeak, err))
	}
	return errors.Join(errs...)
}

// head is the first five of xs, and how many more.
func head(xs []string) []string {
	if len(xs) > 5 {
		return append(xs[:5:5], fmt.Sprintf("... %d more", len(xs)-5))
	}
	return xs
}
