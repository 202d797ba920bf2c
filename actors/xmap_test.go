package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// panicOnce returns negate that panics on its call number n.
func panicOnce(n int) actors.MapFunc {
	var calls atomic.Int64
	return func(s tensor.Slots) (tensor.Slots, error) {
		if calls.Add(1) == int64(n) {
			panic(fmt.Sprintf("xmap function failed at call %d", n))
		}
		return negate(s)
	}
}

// readNegated reads a pass, checking every value is its id negated.
func readNegated(t *testing.T, ctx context.Context, p *actors.Pipeline) []uint64 {
	t.Helper()
	return readPass(t, ctx, p, func(it actors.Item) {
		v, err := tensor.View[int64](it.Slots[0].Tensor)
		require.NoError(t, err)
		for i, id := range it.IDs {
			f, r := messages.SplitID(id)
			require.Equal(t, -int64(f*1_000_000+r), v[i], "instance %d", i)
		}
	})
}

func TestXMapOrderedSurvivesAPanickingFunction(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 150, 400)
	for _, at := range []int{1, 4, 9} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			sys := actors.NewSystem()
			p, err := actors.New([]actors.Stage{actors.Files{Paths: paths},
				actors.XMap{Fn: panicOnce(at), Workers: 4, Buffer: 2}, actors.Batch{Size: 10}},
				actors.Options{System: sys, GroupSize: 5})
			require.NoError(t, err)
			require.Equal(t, allIDs(2, 150), readNegated(t, ctx, p), "in order, each once")
			require.Equal(t, 1, p.Stats().Restarts)
			closeAndCheck(t, p, sys)
		})
	}
}

func TestXMapUnorderedDeliversEachOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 100, 300)
	for _, at := range []int{0, 2, 7} { // 0: no panic
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			sys := actors.NewSystem()
			p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2},
				actors.XMap{Fn: panicOnce(at), Workers: 3}, actors.MultiPass{Passes: 2}},
				actors.Options{System: sys, GroupSize: 4})
			require.NoError(t, err)
			got := readNegated(t, ctx, p)
			requireExactlyOnce(t, append(allIDs(3, 100), allIDs(3, 100)...), got)
			if at > 0 {
				require.Equal(t, 1, p.Stats().Restarts)
			}
			closeAndCheck(t, p, sys)
		})
	}
}

// The workers run at once: the first two calls wait for each other, which
// only a pool of at least two workers lets happen.
func TestXMapWorkersRunConcurrently(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 40, 400)
	var arrived sync.WaitGroup
	arrived.Add(2)
	met := make(chan struct{})
	go func() { arrived.Wait(); close(met) }()
	var calls atomic.Int64
	fn := func(s tensor.Slots) (tensor.Slots, error) {
		c := calls.Add(1)
		if c <= 2 {
			arrived.Done()
			select {
			case <-met:
			case <-ctx.Done():
				return nil, errors.New("the second worker never came")
			}
		}
		return negate(s)
	}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.XMap{Fn: fn, Workers: 2}},
		actors.Options{System: sys, GroupSize: 4})
	require.NoError(t, err)
	require.Equal(t, allIDs(1, 40), readNegated(t, ctx, p))
	closeAndCheck(t, p, sys)
}

// A function error reaches Next after every item before it (ordered).
func TestXMapErrorComesInOrder(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 100, 400)
	bad := errors.New("bad item")
	var calls atomic.Int64
	fn := func(s tensor.Slots) (tensor.Slots, error) {
		c := calls.Add(1)
		if c == 6 {
			return nil, bad
		}
		return negate(s)
	}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.XMap{Fn: fn, Workers: 3}},
		actors.Options{System: sys, GroupSize: 10})
	require.NoError(t, err)
	ids := []uint64{} // the failed item may be the first
	var got error
	for got == nil {
		it, err := p.Next(ctx)
		if err != nil {
			got = err // io.EOF here: the pass ended without the failed item
			break
		}
		ids = append(ids, it.IDs...)
	}
	require.ErrorIs(t, got, bad)
	var se *actors.StageError
	require.ErrorAs(t, got, &se)
	require.Equal(t, "1-xmap", se.Stage)
	// Every item before the failed one arrived, in order, and not the
	// failed one. Which item the 6th call got depends on when the workers
	// ran: a worker that took an item may call fn after another took and
	// mapped the next ones (the test had asserted one of the first 6).
	require.Equal(t, allIDs(1, 100)[:len(ids)], ids)
	require.Less(t, len(ids), 100)
	closeAndCheck(t, p, sys)
}

func TestXMapShutdownWithWorkersBusy(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 400, 400)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.XMap{Fn: negate, Workers: 4}},
		actors.Options{System: sys})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.NoError(t, err)
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(sctx))
	require.NoError(t, sctx.Err(), "shut down within 1 s")
	require.Empty(t, registered.Actors(sys))
}

// Unordered results overtake each other; a restart, by a fault before any
// message or by the function panicking at any call, must still deliver
// each item once. Items of even records take longer, so later results are
// often pushed before earlier ones when the stage restarts.
func TestXMapUnorderedRestartsAnywhere(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 60, 300)
	uneven := func(fn actors.MapFunc) actors.MapFunc {
		return func(s tensor.Slots) (tensor.Slots, error) {
			v, err := tensor.View[int64](s[0].Tensor)
			if err != nil {
				return nil, err
			}
			if v[0]%2 == 0 {
				x := 0
				for i := range 200_000 {
					x += i
				}
				_ = x
			}
			return fn(s)
		}
	}
	for n := 1; n <= 30; n++ {
		for _, fault := range []struct {
			fn     actors.MapFunc
			faults faults.Injector
		}{
			{uneven(negate), faults.PanicAt{Kind: actors.KindXMap, N: int64(n)}},
			{uneven(panicOnce(n)), nil},
		} {
			sys := actors.NewSystem()
			p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.XMap{Fn: fault.fn, Workers: 4, Buffer: 4}},
				actors.Options{System: sys, GroupSize: 1, Faults: fault.faults})
			require.NoError(t, err)
			requireExactlyOnce(t, allIDs(2, 60), readNegated(t, ctx, p))
			require.Equal(t, 1, p.Stats().Restarts)
			closeAndCheck(t, p, sys)
		}
	}
}
