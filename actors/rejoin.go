package actors

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// StateError is a state of Options.Resume that cannot be resumed from,
// Index its place in Resume (-1 when the states as a whole are wrong: a
// rank missing, or states of two jobs).
type StateError struct {
	Index int
	Err   error
}

func (e *StateError) Error() string { return e.Err.Error() }
func (e *StateError) Unwrap() error { return e.Err }

func stateError(i int, format string, a ...any) error {
	return &StateError{Index: i, Err: fmt.Errorf("%w: "+format, append([]any{ErrState}, a...)...)}
}

// MaxEpoch bounds State.Epoch.
const MaxEpoch = math.MaxUint32

// FreshState is the state of rank shard.Rank of a job stopped before it
// delivered anything, before its pipeline was even built (so before its
// files were indexed): resuming from it starts the job afresh, and
// Rejoin takes it with the other ranks' states.
func FreshState(shard Shard) State {
	return State{Version: StateVersion, Fresh: true, Layout: order.Layout{World: shard.world(), GlobalBatch: uint64(shard.GlobalBatch)}, Rank: shard.Rank}
}

// Rejoin is the state that rank shard.Rank of shard.World continues from,
// given the states of a stopped job:
//   - one state of this rank on the same world: itself, so that the rank
//     goes on exactly as the uninterrupted run would have;
//   - the states of every rank (in any order): when they all stopped at
//     the same position with nothing committed past it, on the same world,
//     this rank's own; otherwise the positions of their epoch that no rank
//     delivered, whatever step each stopped at, re-dealt in equal shares
//     among the new ranks. A rank that finished its share of the epoch
//     stands at the next one's start, and counts as at the end of this one;
//   - one state of a job of one rank: the rest of it, re-dealt.
//
// Every field of every state is checked against the others and against
// the limits first, each refusal a StateError naming the state and the
// field; nothing is sized by a number a state holds. Options.Resume does
// this, and checks the states against the pipeline's data and order too.
func Rejoin(states []State, shard Shard) (State, error) {
	if len(states) == 0 {
		return State{}, stateError(-1, "no state given")
	}
	if err := shard.check(); err != nil {
		return State{}, err
	}
	for i := range states {
		if err := checkState(&states[i]); err != nil {
			return State{}, &StateError{Index: i, Err: fmt.Errorf("%w: %w", ErrState, err)}
		}
	}
	states = unfresh(states)
	st, world := states[0], shard.world()
	if g := uint64(shard.GlobalBatch); st.Layout.GlobalBatch != g {
		return State{}, stateError(0, "%s", otherGlobalBatch(st.Layout.GlobalBatch, g))
	}
	if len(states) == 1 {
		switch {
		case st.Layout.World == world && st.Rank != shard.Rank:
			return State{}, stateError(0, "the state is rank %d's and this is rank %d: give each rank its own state, or every rank's states", st.Rank, shard.Rank)
		case st.Layout.World == world:
			return st, nil
		case st.Layout.World > 1:
			return State{}, stateError(0, "the state is rank %d's of a job of %d ranks: resuming on %d rank(s) needs the states of all %d",
				st.Rank, st.Layout.World, world, st.Layout.World)
		}
	}
	states = finishedEpoch(states)
	if err := oneJob(states); err != nil {
		return State{}, err
	}
	slices.SortFunc(states, func(a, b State) int { return a.Rank - b.Rank })
	if states[0].Fresh {
		return FreshState(shard), nil // no rank delivered anything
	}
	if st.Layout.World == world && sameStep(states) {
		return states[shard.Rank], nil
	}
	return regroup(states, shard)
}

// unfresh is states (a copy) where fresh ones stand at the start of the
// job of another state's data and order: no rank delivered anything of it.
func unfresh(states []State) []State {
	states = slices.Clone(states)
	at := slices.IndexFunc(states, func(st State) bool { return !st.Fresh })
	if at < 0 {
		return states
	}
	for i, st := range states {
		if st.Fresh {
			like := states[at]
			like.Epoch, like.Rank, like.Done, like.Beyond = 0, st.Rank, 0, nil
			like.Layout = order.Full(like.Positions(), st.Layout.World, like.Layout.GlobalBatch)
			like.Unit = unitOf(like.Layout, st.Rank, like.Unit)
			states[i] = like
		}
	}
	return states
}

// finishedEpoch is states where the ranks that finished their share of
// the epoch the others stopped in, and stand at the next one's start,
// stand at the end of that epoch instead.
func finishedEpoch(states []State) []State {
	first := slices.MinFunc(states, func(a, b State) int { return cmp.Compare(a.Epoch, b.Epoch) })
	for i, st := range states {
		if st.Epoch == first.Epoch+1 && st.Done == 0 && len(st.Beyond) == 0 {
			rem, _ := order.ParseRemainder(first.Remainder) // checked
			st.Epoch, st.Layout, st.Done = first.Epoch, first.Layout, first.Layout.Share(st.Rank, rem)
			states[i] = st
		}
	}
	return states
}

// oneJob says why states are not those of every rank of one stopped job,
// if they are not.
func oneJob(states []State) error {
	first, world := states[0], states[0].Layout.World
	seen := make([]bool, world)
	for i, st := range states {
		switch {
		case st.Version != first.Version || !st.Data.same(first.Data) || st.Seed != first.Seed || st.Window != first.Window ||
			st.Shuffled != first.Shuffled || st.Global != first.Global || !sameBlend(st.Blend, first.Blend) || st.Unit != unitOf(st.Layout, st.Rank, first.Unit) || st.Remainder != first.Remainder:
			return stateError(i, "the state's data set or order is not the first state's: states of two jobs")
		case st.Epoch != first.Epoch:
			return stateError(i, "the state is in epoch %d and another in epoch %d: the ranks of a job resume together from one epoch, where some may have finished their share",
				st.Epoch, first.Epoch)
		case !sameLayout(st.Layout, first.Layout):
			return stateError(i, "the state's layout (%d ranks, %d ranges) is not the first's (%d ranks, %d ranges): states of two jobs",
				st.Layout.World, len(st.Layout.Ranges), world, len(first.Layout.Ranges))
		case seen[st.Rank]:
			return stateError(i, "rank %d's state is given twice", st.Rank)
		}
		seen[st.Rank] = true
	}
	if missing := slices.Index(seen, false); missing >= 0 {
		return stateError(-1, "the states are of a job of %d ranks and rank %d's is missing (%d of %d given): resuming needs the states of all %d",
			world, missing, len(states), world, world)
	}
	return nil
}

func sameLayout(a, b order.Layout) bool {
	return a.World == b.World && a.GlobalBatch == b.GlobalBatch && a.FirstStep == b.FirstStep && slices.Equal(a.Ranges, b.Ranges)
}

// unitOf is the positions an item of rank of layout l: under a global
// batch the rank's slice of a step, else every rank's unit.
func unitOf(l order.Layout, rank, unit int) int {
	if l.GlobalBatch == 0 {
		return unit
	}
	_, n := order.StepSlice(l.GlobalBatch, l.World, rank)
	return int(n)
}

// sameStep says whether every rank stopped at the same item with nothing
// committed past it, as a synchronous trainer's ranks do.
func sameStep(states []State) bool {
	for _, st := range states {
		if st.Done/uint64(st.Unit) != states[0].Done/uint64(states[0].Unit) || len(st.Beyond) > 0 {
			return false
		}
	}
	return true
}

// regroup re-deals the positions of the states' epoch that no rank
// delivered among the new ranks, and is shard's state of the result.
// states are every rank's, sorted by rank.
func regroup(states []State, shard Shard) (State, error) {
	st := states[0]
	rem, _ := order.ParseRemainder(st.Remainder) // checked
	progress := make([]order.Progress, len(states))
	for i, s := range states {
		if n := len(s.Beyond); n > 0 && s.Beyond[n-1] >= st.Layout.Share(s.Rank, rem) {
			return State{}, stateError(i, "rank %d committed items of epoch %d already (a multi-pass stage's): resume each rank from its own state on %d ranks",
				s.Rank, s.Epoch+1, st.Layout.World)
		}
		progress[i] = order.Progress{Done: s.Done, Beyond: s.Beyond}
	}
	st.Layout = st.Layout.Regroup(rem, uint64(st.Unit), progress, shard.world())
	st.Rank, st.Done, st.Beyond = shard.Rank, 0, nil
	st.Unit = unitOf(st.Layout, shard.Rank, st.Unit)
	return st, nil
}

// rejoin is Rejoin for this pipeline: each state is checked against its
// data set and order first; fresh states resume as the job's start.
func (p *orderPlan) rejoin(states []State) (State, error) {
	for i, st := range states {
		if st.Fresh {
			continue
		}
		if err := p.compatible(&st); err != nil {
			return State{}, &StateError{Index: i, Err: fmt.Errorf("%w: %w", ErrState, err)}
		}
	}
	return Rejoin(states, Shard{Rank: p.Rank, World: p.World, Remainder: p.Remainder, GlobalBatch: int(p.GlobalBatch)})
}

// checkState says which field of st cannot be resumed from, if one
// cannot: its version, epoch, layout, rank, position, and the items it
// lists past its position, against its own data set and order and the
// limits. Nothing it checks allocates or loops by more than the state
// holds.
func checkState(st *State) error {
	l := st.Layout
	switch {
	case st.Version != StateVersion:
		return fmt.Errorf("version %d, this build reads %d", st.Version, StateVersion)
	case l.World < 1 || l.World > MaxWorld:
		return fmt.Errorf("layout: world %d is not from 1 to %d", l.World, MaxWorld)
	case st.Rank < 0 || st.Rank >= l.World:
		return fmt.Errorf("rank %d is not a rank of its layout's %d", st.Rank, l.World)
	case st.Fresh:
		return nil
	case st.Epoch < 0 || st.Epoch > MaxEpoch:
		return fmt.Errorf("epoch %d is not %s", st.Epoch, stateRanges["epoch"])
	case st.Unit < 1 || st.Unit > MaxBatch:
		return fmt.Errorf("unit: %d positions an item is not %s", st.Unit, stateRanges["unit"])
	case st.Window < 0 || st.Window > MaxWindow:
		return fmt.Errorf("window %d is not %s", st.Window, stateRanges["window"])
	case st.Data.Files < 1 || st.Data.Files > messages.MaxFiles:
		return fmt.Errorf("data: %d files is not %s", st.Data.Files, stateRanges["data.files"])
	case st.Data.Splits < 0 || uint64(st.Data.Splits) > st.Data.Records:
		return fmt.Errorf("data: %d splits is not %s", st.Data.Splits, stateRanges["data.splits"])
	case st.Blend != nil && (st.Blend.Samples < 1 || st.Blend.Samples > messages.MaxRecords):
		return fmt.Errorf("blend.samples: %d is not %s", st.Blend.Samples, stateRanges["blend.samples"])
	}
	rem, err := order.ParseRemainder(st.Remainder)
	if err != nil {
		return fmt.Errorf("remainder: %w", err)
	}
	if err := l.Check(st.Positions()); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	share, unit := l.Share(st.Rank, rem), uint64(st.Unit)
	switch {
	case l.GlobalBatch > 0 && st.Unit != unitOf(l, st.Rank, st.Unit):
		return fmt.Errorf("unit: %d positions an item, and rank %d's slice of a global batch of %d among %d ranks is %d",
			st.Unit, st.Rank, l.GlobalBatch, l.World, unitOf(l, st.Rank, st.Unit))
	case st.Done > share:
		return fmt.Errorf("done: %d positions of a share of %d", st.Done, share)
	case st.Done%unit != 0 && st.Done != share:
		return fmt.Errorf("done: %d is not where an item of %d positions ends", st.Done, unit)
	}
	return checkBeyond(st, share, order.Full(st.Positions(), l.World, l.GlobalBatch).Share(st.Rank, rem))
}

// checkBeyond checks the items st lists past its position: each the start
// of an item (a multiple of the batch size) past Done, in increasing
// order, in its epoch's share or the next epoch's (next positions, a
// multi-pass stage's), never more than there are items there.
func checkBeyond(st *State, share, next uint64) error {
	unit := uint64(st.Unit)
	if n := uint64(len(st.Beyond)); n > (share-st.Done)/unit+next/unit+2 {
		return fmt.Errorf("beyond: %d items listed past position %d, more than there are", n, st.Done)
	}
	for i, b := range st.Beyond {
		rel := b
		if b >= share {
			rel = b - share
		}
		switch {
		case b < st.Done:
			return fmt.Errorf("beyond[%d]: %d is before the position, %d", i, b, st.Done)
		case i > 0 && b <= st.Beyond[i-1]:
			return fmt.Errorf("beyond[%d]: %d does not follow %d", i, b, st.Beyond[i-1])
		case b >= share+next:
			return fmt.Errorf("beyond[%d]: %d is past the epoch's share (%d) and the next's (%d)", i, b, share, next)
		case rel%unit != 0:
			return fmt.Errorf("beyond[%d]: %d is not where an item of %d positions starts", i, b, unit)
		}
	}
	return nil
}
