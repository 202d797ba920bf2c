package actors_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/faults"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// trainChain is the chain the fault tests run: ordered open_files over 3
// files -> shuffle -> ordered xmap on 3 workers -> batch(16) -> double
// buffer.
func trainChain(paths []string, passes int) []actors.Stage {
	st := []actors.Stage{actors.Files{Paths: paths, Threads: 3}}
	if passes > 1 {
		st = append(st, actors.MultiPass{Passes: passes})
	}
	return append(st, actors.Shuffle{Window: 50, Seed: 7}, actors.XMap{Fn: negate, Workers: 3},
		actors.Batch{Size: 16}, actors.DoubleBuffer{Window: 2})
}

// negate flips the sign of the value slot (deviceStep checks it), into new
// storage.
func negate(s tensor.Slots) (tensor.Slots, error) {
	v, err := tensor.View[int64](s[0].Tensor)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return tensor.Slots{{Tensor: tensor.MustFromSlice(s[0].Shape(), out)}, s[1]}, nil
}

// runDevices runs one (possibly multi-pass) pass on n devices and returns
// what each device stepped, in order. Batch storage is recycled, so a batch
// reused while a device still read it would fail deviceStep's check.
func runDevices(t *testing.T, paths []string, passes, n int, faults faults.Injector) ([][]uint64, actors.Stats) {
	t.Helper()
	ctx := testutil.Context(t)
	sys := actors.NewSystem()
	var devMu sync.Mutex
	order := make([][]uint64, n)
	p, err := actors.NewDevices(trainChain(paths, passes), actors.Devices{N: n, Step: deviceStep(&devMu, order, -1), Recycle: true},
		actors.Options{System: sys, Faults: faults, GroupSize: 8})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	st := p.Stats()
	closeAndCheck(t, p, sys)
	return order, st
}

// deviceStep records the ids each device steps, and checks that every
// instance holds sign times its record's value (negate flips it); the
// device index comes from the context.
func deviceStep(mu *sync.Mutex, order [][]uint64, sign int64) actors.StepFunc {
	return func(ctx context.Context, it actors.Item) error {
		d := actors.DeviceFrom(ctx)
		if it.Seq%len(order) != d {
			return fmt.Errorf("device %d stepped item %d of the pass", d, it.Seq)
		}
		vals, err := tensor.View[int64](it.Slots[0].Tensor)
		if err != nil {
			return err
		}
		for i, id := range it.IDs {
			if f, r := messages.SplitID(id); vals[i] != sign*int64(f*1_000_000+r) {
				return fmt.Errorf("instance %d: value %d does not match id %d#%d", i, vals[i], f, r)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		order[d] = append(order[d], it.IDs...)
		return nil
	}
}

func TestExactlyOnceUnderPanics(t *testing.T) {
	const files, records, passes, devices = 3, 120, 2, 2
	paths := testutil.WriteFiles(t, files, records, 200)
	want, st := runDevices(t, paths, passes, devices, nil)
	require.Positive(t, st.Recycled, "batches were made in recycled storage")
	t.Logf("%d of %d batches made in recycled storage", st.Recycled, passes*files*records/16)
	var all []uint64
	for _, ids := range want {
		all = append(all, ids...)
	}
	var expect []uint64
	for range passes {
		expect = append(expect, allIDs(files, records)...)
	}
	requireExactlyOnce(t, expect, all)

	kinds := []string{actors.KindFileReader, actors.KindFiles, actors.KindMultiPass, actors.KindShuffle,
		actors.KindXMap, actors.KindBatch, actors.KindDoubleBuffer, actors.KindDevice}
	for _, kind := range kinds {
		for _, n := range []int64{1, 2, 3, 5, 8, 13, 21, 34} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				got, st := runDevices(t, paths, passes, devices, faults.PanicAt{Kind: kind, N: n})
				require.Positive(t, st.Restarts, "the fault fired")
				for d := range devices {
					require.True(t, slices.Equal(want[d], got[d]), "device %d: order differs from the fault-free run", d)
				}
			})
		}
	}
}

// Without a stage between the file readers and the batch stage that reads
// the bytes, the readers' groups are recycled once batched. Under a panic
// at any stage, every sample is still stepped once per pass, in the
// fault-free order, and holds its own value: a block reused while a row of
// it was still to be copied would show another sample's.
func TestRecycledGroupsUnderPanics(t *testing.T) {
	const files, records, passes, devices = 3, 120, 2, 2
	paths := testutil.WriteFiles(t, files, records, 200)
	run := func(t *testing.T, faults faults.Injector) ([][]uint64, actors.Stats) {
		t.Helper()
		ctx := testutil.Context(t)
		var mu sync.Mutex
		order := make([][]uint64, devices)
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths, Threads: 3},
			actors.Shuffle{Window: 50, Seed: 7}, actors.Batch{Size: 16}, actors.DoubleBuffer{Window: 2}},
			actors.Devices{N: devices, Step: deviceStep(&mu, order, 1), Recycle: true},
			actors.Options{System: sharedSys, Faults: faults, GroupSize: 8})
		require.NoError(t, err)
		for pass := range passes {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			require.NoError(t, p.Run(ctx))
		}
		st := p.Stats()
		closeAndCheck(t, p, sharedSys)
		return order, st
	}
	want, st := run(t, nil)
	require.Positive(t, st.RecycledGroups, "groups were stacked into recycled blocks")
	t.Logf("%d of %d groups stacked into recycled blocks", st.RecycledGroups, passes*files*records/8)
	var all, expect []uint64
	for _, ids := range want {
		all = append(all, ids...)
	}
	for range passes {
		expect = append(expect, allIDs(files, records)...)
	}
	requireExactlyOnce(t, expect, all)

	kinds := []string{actors.KindFileReader, actors.KindFiles, actors.KindShuffle, actors.KindBatch,
		actors.KindDoubleBuffer, actors.KindDevice}
	for _, kind := range kinds {
		for _, n := range []int64{1, 3, 8, 21, 34} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				got, st := run(t, faults.PanicAt{Kind: kind, N: n})
				require.Positive(t, st.Restarts, "the fault fired")
				for d := range devices {
					require.True(t, slices.Equal(want[d], got[d]), "device %d: order differs from the fault-free run", d)
				}
			})
		}
	}
}

// Found by the simulator (seed 1287): the open_files coordinator restarted
// with a finished file's groups and End still in its mailbox; it took them
// in under the old epoch, marked the file done, and never moved its reader
// on, so the pass hung. A panic at every message of two Reset passes.
func TestFilesRestartWithAnOldEndInTheMailbox(t *testing.T) {
	paths := testutil.WriteFiles(t, 3, 21, 4000)
	panicEverywhereOverResets(t, 36, 2, 2*63, actors.KindFiles, func(fault faults.Injector) (*actors.Pipeline, error) {
		return actors.NewDevices([]actors.Stage{actors.Files{Paths: paths, Threads: 1}, actors.Batch{Size: 17}},
			actors.Devices{N: 3}, actors.Options{System: sharedSys, GroupSize: 16, Faults: fault})
	})
}

// Found by the simulator (seeds 100526, 101525): a device that panicked on
// the message by which Reset starts its next pass lost that message, and
// the pass never started. A panic at each message over three passes.
func TestDeviceRestartAcrossReset(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 13, 4000)
	panicEverywhereOverResets(t, 30, 3, 3*26, actors.KindDevice, func(fault faults.Injector) (*actors.Pipeline, error) {
		return actors.NewDevices([]actors.Stage{actors.Files{Paths: paths, Threads: 1}, actors.Batch{Size: 18}},
			actors.Devices{N: 3}, actors.Options{System: sharedSys, Faults: fault})
	})
}

// sharedSys is the actor system of the tests that build many pipelines.
var sharedSys = actors.NewSystem()

// panicEverywhereOverResets builds a pipeline for each message number up to
// messages, with a panic at that message of every stage of kind, runs
// passes passes (Reset between them), and requires that the devices stepped
// want samples in all.
func panicEverywhereOverResets(t *testing.T, messages int64, passes, want int, kind string, build func(faults.Injector) (*actors.Pipeline, error)) {
	t.Helper()
	ctx := testutil.Context(t)
	for n := int64(1); n <= messages; n++ {
		p, err := build(faults.PanicAt{Kind: kind, N: n})
		require.NoError(t, err)
		for pass := range passes {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			require.NoError(t, p.Run(ctx), "panic at message %d, pass %d", n, pass)
		}
		total := 0
		for _, d := range p.Stats().Devices {
			total += d.Instances
		}
		require.Equal(t, want, total, "panic at message %d", n)
		closeAndCheck(t, p, sharedSys)
	}
}
