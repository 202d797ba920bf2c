package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/tensor"
)

// countedStorage is a Storage over ordinary memory that records every
// block it gives and takes back, and fails after failAfter blocks when set.
type countedStorage struct {
	mu        sync.Mutex
	given     map[*byte]int // block -> times freed
	failAfter int
}

func (s *countedStorage) Alloc(size int) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter > 0 && len(s.given) >= s.failAfter {
		return nil, errors.New("out of pinned memory")
	}
	words := make([]uint64, size/8+2) // 8-byte aligned, with room to spare: Free must get what Alloc gave
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), size+8)[:size]
	s.given[unsafe.SliceData(b)] = 0
	return b, nil
}

func (s *countedStorage) Free(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.given[unsafe.SliceData(b)]
	if !ok || cap(b) != len(b)+8 {
		panic(fmt.Sprintf("Free of storage Alloc did not give: %p", unsafe.SliceData(b)))
	}
	s.given[unsafe.SliceData(b)] = n + 1
}

// owns says whether b lies in a block the storage gave.
func (s *countedStorage) owns(b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.given[unsafe.SliceData(b)]
	return ok
}

// Batches are made in the Storage the devices give, in place (every slot
// a device steps is a block Alloc returned: no copy after the batch
// stage's), recycled (far fewer blocks than batches), and every block is
// freed exactly once when the pipeline closes, across passes, a Reset in
// the middle of one, and lanes.
func TestBatchesAreMadeInTheDevicesStorage(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 400, 1000)
	for _, lanes := range []int{1, 3} {
		st := &countedStorage{given: map[*byte]int{}}
		sys := actors.NewSystem()
		var stepped, foreign int
		var mu sync.Mutex
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 16}},
			actors.Devices{N: 2, Storage: st, Step: func(_ context.Context, it actors.Item) error {
				mu.Lock()
				defer mu.Unlock()
				stepped++
				for _, s := range it.Slots {
					if !st.owns(s.Bytes()) {
						foreign++
					}
				}
				return nil
			}}, actors.Options{System: sys, Lanes: lanes})
		require.NoError(t, err)
		for pass := range 3 {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			require.NoError(t, p.Run(ctx))
		}
		mu.Lock()
		ran := stepped // the devices may step a few batches of the pass below
		mu.Unlock()
		require.NoError(t, p.Reset()) // a pass started and dropped
		recycled := p.Stats().Recycled
		closeAndCheck(t, p, sys)
		require.Equal(t, 3*1200/16, ran, "%d lanes", lanes)
		require.Zero(t, foreign, "slots not in the devices' storage")
		require.Positive(t, recycled)
		require.Less(t, len(st.given), 2*stepped/3, "blocks allocated for %d batches: recycled", stepped)
		for b, n := range st.given {
			require.Equal(t, 1, n, "block %p freed once", b)
		}
	}
}

// A Storage that fails fails the pipeline, saying so; what it gave is
// freed.
func TestStorageThatFailsFailsThePipeline(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 400, 1000)
	st := &countedStorage{given: map[*byte]int{}, failAfter: 5}
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 8}},
		actors.Devices{N: 1, Storage: st, StepTime: 0}, actors.Options{System: sys})
	require.NoError(t, err)
	err = p.Run(ctx)
	require.ErrorContains(t, err, "out of pinned memory")
	require.ErrorContains(t, err, "batch storage: Alloc")
	closeAndCheck(t, p, sys)
	for b, n := range st.given {
		require.Equal(t, 1, n, "block %p freed once", b)
	}
}

// Storage makes the batch stage's batches the devices' own: a stage
// between them is refused.
func TestStorageNeedsTheBatchStageLast(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 10, 1000)
	identity := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	_, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 2}, actors.Map{Fn: identity}},
		actors.Devices{N: 1, Storage: &countedStorage{given: map[*byte]int{}}}, actors.Options{})
	require.ErrorIs(t, err, actors.ErrBadSpec)
	require.ErrorContains(t, err, "Storage")
}

// A sample map right after the batch stage makes its results in the storage
// of batches the devices stepped and handed back (Samples.Storage), and the
// batch stage does not take it: every device sees its batch's own values,
// and most results are made in recycled storage, with lanes too.
func TestASampleMapMakesItsResultsInSteppedStorage(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 400, 1000)
	for _, lanes := range []int{1, 3} {
		var mu sync.Mutex
		var made, recycled, stepped, wrong int
		ids := func(s actors.Samples, _ tensor.Slots) (tensor.Slots, error) {
			b := s.Storage(8 * len(s.IDs))
			mu.Lock()
			made++
			if b != nil {
				recycled++
			}
			mu.Unlock()
			out, err := tensor.WrapBytes(tensor.Int64, tensor.Shape{len(s.IDs)}, tensor.Storage(nil, 8*len(s.IDs), func(int) []byte { return b }))
			if err != nil {
				return nil, err
			}
			v, _ := tensor.View[int64](out)
			for i, id := range s.IDs {
				v[i] = int64(id)
			}
			return tensor.Slots{{Tensor: out}}, nil
		}
		step := func(_ context.Context, it actors.Item) error {
			v, err := tensor.View[int64](it.Slots[0].Tensor)
			mu.Lock()
			defer mu.Unlock()
			stepped++
			for i, id := range it.IDs {
				if err != nil || v[i] != int64(id) {
					wrong++
				}
			}
			return nil
		}
		sys := actors.NewSystem()
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 16}, actors.Map{Samples: ids}},
			actors.Devices{N: 2, Step: step, Recycle: true}, actors.Options{System: sys, Lanes: lanes})
		require.NoError(t, err)
		for pass := range 3 {
			if pass > 0 {
				require.NoError(t, p.Reset())
			}
			require.NoError(t, p.Run(ctx))
		}
		closeAndCheck(t, p, sys)
		require.Equal(t, 3*1200/16, stepped, "%d lanes", lanes)
		require.Zero(t, wrong, "values another batch wrote")
		require.Greater(t, recycled, made/2, "%d of %d results in recycled storage", recycled, made)
	}
}
