package actors_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/tensor"
)

// jobStates runs ranks of a job of world ranks, rank r stopping after
// steps[r] batches, and returns their states.
// dataSet is a job's files and the order they are read in: ordered's
// windows, or, global, the global order (globalIDX's files), perhaps in
// global steps of globalBatch samples.
type dataSet struct {
	paths       []string
	global      bool
	globalBatch int
}

// stages is the job's pipeline with threads readers, for rank of world.
func (d dataSet) stages(threads int, shard actors.Shard) []actors.Stage {
	if d.globalBatch > 0 {
		return []actors.Stage{actors.Files{Paths: d.paths, Threads: threads}, actors.Shuffle{Global: true, Seed: 11},
			actors.Batch{Size: d.shard(shard).StepBatch()}}
	}
	if d.global {
		return global(d.paths, threads)
	}
	return ordered(d.paths, threads)
}

// shard is shard with the data set's global batch.
func (d dataSet) shard(shard actors.Shard) actors.Shard {
	shard.GlobalBatch = d.globalBatch
	return shard
}

func jobStates(t testing.TB, ctx context.Context, d dataSet, world int, rem order.Remainder, steps []int) []actors.State {
	t.Helper()
	var out []actors.State
	for rank := range world {
		shard := d.shard(actors.Shard{Rank: rank, World: world, Remainder: rem})
		p, err := actors.New(d.stages(2, shard), actors.Options{System: sharedSys, GroupSize: 8, Shard: shard})
		require.NoError(t, err)
		for range steps[rank] {
			_, err := p.Next(ctx)
			require.NoError(t, err)
		}
		closeAndCheck(t, p, sharedSys)
		st, err := p.State()
		require.NoError(t, err)
		out = append(out, st)
	}
	return out
}

// Every field of a state is checked before anything runs, and each
// refusal names the field: states from another rank, of impossible ranks
// and worlds, and lists of items committed ahead that no run could write.
func TestResumeRefusesStatesThatCannotBeTrusted(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	states := jobStates(t, ctx, dataSet{paths: paths}, 2, order.Drop, []int{2, 3})
	mod := func(f func(*actors.State)) []actors.State {
		st := states[0]
		st.Beyond = []uint64{64}
		f(&st)
		return []actors.State{st}
	}
	cases := []struct {
		name   string
		states []actors.State
		rank   int
		world  int
		want   string
	}{
		{"another rank's state", states[1:], 0, 2, "the state is rank 1's and this is rank 0"},
		{"rank 5 of 1", mod(func(s *actors.State) { s.Rank, s.Layout.World = 5, 1 }), 0, 1, "rank 5 is not a rank"},
		{"rank -1", mod(func(s *actors.State) { s.Rank = -1 }), 0, 2, "rank -1 is not a rank"},
		{"a world of 10^18", mod(func(s *actors.State) { s.Layout.World = 1e18 }), 0, 2, "world 1000000000000000000"},
		{"beyond twice", mod(func(s *actors.State) { s.Beyond = []uint64{64, 64} }), 0, 2, "beyond[1]: 64 does not follow 64"},
		{"beyond below the position", mod(func(s *actors.State) { s.Beyond = []uint64{16} }), 0, 2, "beyond[0]: 16 is before the position"},
		{"beyond unaligned", mod(func(s *actors.State) { s.Beyond = []uint64{65} }), 0, 2, "beyond[0]: 65 is not where an item"},
		{"beyond 2^64-1", mod(func(s *actors.State) { s.Beyond = []uint64{math.MaxUint64} }), 0, 2, "past the epoch's share"},
		{"50,000 beyond", mod(func(s *actors.State) {
			s.Beyond = nil
			for i := range uint64(50_000) {
				s.Beyond = append(s.Beyond, 48+16*i)
			}
		}), 0, 2, "50000 items listed"},
		{"done past the share", mod(func(s *actors.State) { s.Done = 1000 }), 0, 2, "done: 1000 positions of a share of 105"},
		{"a range past the data", mod(func(s *actors.State) { s.Layout.Ranges = []order.Range{{Lo: 0, Hi: 211}} }), 0, 2, "layout"},
		{"an epoch past the limit", mod(func(s *actors.State) { s.Epoch = math.MaxInt }), 0, 2, "epoch"},
		{"a negative epoch", mod(func(s *actors.State) { s.Epoch = -1 }), 0, 2, "epoch -1"},
		{"a rank missing", states[:1], 0, 3, "needs the states of all 2"},
		{"a rank twice", []actors.State{states[0], states[0]}, 0, 3, "rank 0's state is given twice"},
		{"states of two jobs", []actors.State{states[0], mod(func(s *actors.State) { s.Rank, s.Epoch, s.Beyond = 1, 1, nil })[0]}, 0, 3, "epoch"},
	}
	for _, c := range cases {
		_, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8, Resume: c.states,
			Shard: actors.Shard{Rank: c.rank, World: c.world}})
		require.ErrorIs(t, err, actors.ErrState, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		var se *actors.StateError
		require.True(t, errors.As(err, &se), c.name)
	}
}

// A data set with an empty file has fewer splits than files (an empty
// file has none); its states are as good as any other's, saved as JSON
// and read back by DecodeState included.
func TestStateOverAnEmptyFileResumes(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 70, 0) // one chunk: one split
	for _, name := range []string{"empty-1.rio", "empty-2.rio"} {
		paths = append(paths, testutil.WriteRecords(t, filepath.Join(t.TempDir(), name), 0, 0,
			func(r int) tensor.Slots { return testutil.Sample(1, r) }))
	}
	states := jobStates(t, ctx, dataSet{paths: paths}, 2, order.Drop, []int{2, 3})
	for i, st := range states {
		b, err := json.Marshal(st)
		require.NoError(t, err)
		back, err := actors.DecodeState(b)
		require.NoError(t, err, "state %d", i)
		require.Less(t, back.Data.Splits, back.Data.Files, "the case this test is about")
		states[i] = back
	}
	p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8, Resume: states,
		Shard: actors.Shard{Rank: 0, World: 2, Remainder: order.Drop}})
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.NoError(t, err)
	closeAndCheck(t, p, sharedSys)
}

// Ranks that stopped at different steps, and ranks of which one finished
// its share of the epoch while another had not, resume on the same, a
// larger and a smaller world, several times in one epoch: every sample is
// delivered once (the job: 640 samples were lost or repeated).
func TestJobResizedFromDifferentStepsDeliversEachSampleOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 100, 300)
	for _, rem := range []order.Remainder{order.Pad, order.Drop} {
		seen := map[uint64]int{}
		var states []actors.State
		for i, world := range []int{2, 3, 1, 4, 4} {
			next := make([]actors.State, world)
			for rank := range world {
				p, err := actors.New(ordered(paths, 2), actors.Options{System: sharedSys, GroupSize: 8, Resume: states,
					Shard: actors.Shard{Rank: rank, World: world, Remainder: rem}})
				require.NoError(t, err)
				steps := 1 + (rank*3+i)%4
				if i == 4 {
					steps = math.MaxInt // the last world runs to the end
				}
				for range steps {
					it, err := p.Next(ctx)
					if err != nil {
						break // the rank's share ended: it stands at the next epoch
					}
					for _, id := range it.IDs[:it.Instances-it.Padding] {
						seen[id]++
					}
				}
				closeAndCheck(t, p, sharedSys)
				st, err := p.State()
				require.NoError(t, err)
				next[rank] = *saved(t, st)
			}
			states = next
		}
		for id, k := range seen {
			require.Equal(t, 1, k, "%s: sample %x", rem, id)
		}
		if rem == order.Pad {
			require.Len(t, seen, 400, "every sample of the epoch")
		} else {
			require.GreaterOrEqual(t, len(seen), 400-2-3-1-4-4, "drop leaves out fewer than a world's worth at each re-deal")
		}
	}
}

// FuzzResume mutates the states of a real job of two ranks (stopped at
// different steps, one with an item committed ahead) and resumes a job of
// world ranks from them: it is refused with ErrState, or every sample that
// the states do not say was delivered is delivered once, and none that
// they say was. field/12 odd takes the job in the global order.
func FuzzResume(f *testing.F) {
	ctx := testutil.Context(f)
	sets := []dataSet{{paths: testutil.WriteFiles(f, 2, 40, 300)}, {paths: globalIDX(f, 40, 40), global: true},
		{paths: globalIDX(f, 40, 40), global: true, globalBatch: 10}}
	jobs := make([][]actors.State, len(sets))
	for i, d := range sets {
		jobs[i] = jobStates(f, ctx, d, 2, order.Pad, []int{1, 2})
		jobs[i][0].Beyond = []uint64{32}
		if d.globalBatch > 0 {
			jobs[i][0].Beyond = []uint64{15} // an item of rank 0's 5 samples a step
		}
	}
	for _, g := range []uint8{0, 14, 28} { // windowed, global, global steps
		f.Add(g+0, uint8(0), uint64(0), uint8(2))
		f.Add(g+3, uint8(1), uint64(48), uint8(3))
		f.Add(g+5, uint8(0), uint64(16), uint8(1))
		f.Add(g+12, uint8(1), uint64(12), uint8(3))
		f.Add(g+13, uint8(0), uint64(2), uint8(1))
	}
	// The epoch's extremes: a state at 2^62 once read as "nothing to do".
	for _, epoch := range []uint64{1 << 62, 1 << 32, math.MaxUint32, math.MaxUint64, 1<<63 - 1} {
		f.Add(uint8(4), uint8(0), epoch, uint8(2))
		f.Add(uint8(4), uint8(1), epoch, uint8(3))
		f.Add(uint8(18), uint8(1), epoch, uint8(3))
		f.Add(uint8(32), uint8(0), epoch, uint8(4))
	}
	f.Fuzz(func(t *testing.T, field, rank uint8, v uint64, world uint8) {
		ctx := testutil.Context(t)
		k := int(field/14) % 3
		d := sets[k]
		states := mutate(jobs[k], int(field), int(rank%2), v)
		got, err := resumeJob(t, ctx, d, states, 1+int(world%4))
		if err != nil {
			require.ErrorIs(t, err, actors.ErrState)
			return
		}
		before := deliveredBy(t, ctx, d, states)
		for id, k := range got {
			require.Equal(t, 1, k, "sample %x: delivered twice", id)
			require.False(t, before[id], "sample %x: delivered again", id)
		}
		for id := range before {
			got[id]++
		}
		require.Len(t, got, 80, "every sample of the epoch")
	})
}

// mutate is a copy of job with one field of rank's state set from v.
func mutate(job []actors.State, field, rank int, v uint64) []actors.State {
	states := slices.Clone(job)
	for i := range states {
		states[i].Beyond = slices.Clone(states[i].Beyond)
		states[i].Layout.Ranges = slices.Clone(states[i].Layout.Ranges)
	}
	st := &states[rank]
	switch field % 14 {
	case 1:
		st.Rank = int(int64(v))
	case 2:
		st.Layout.World = int(int64(v))
	case 3:
		st.Done = v
	case 4:
		st.Epoch = int(int64(v))
	case 5:
		st.Beyond = append(st.Beyond, v)
	case 6:
		st.Beyond = []uint64{v}
	case 7:
		st.Layout.Ranges[0].Lo = v
	case 8:
		st.Layout.Ranges = append(st.Layout.Ranges, order.Range{Lo: v, Hi: v + 1 + v%7})
	case 9:
		return states[rank : rank+1] // one rank's state
	case 10:
		return append(states, *st) // a rank twice
	case 11:
		st.Layout.Ranges[0].Hi = v
	case 12:
		st.Layout.GlobalBatch = v
	case 13:
		st.Layout.FirstStep = v
	}
	return states
}

// resumeJob resumes world ranks from states and reads the rest of their
// epoch: the samples delivered (padding aside).
func resumeJob(t *testing.T, ctx context.Context, d dataSet, states []actors.State, world int) (map[uint64]int, error) {
	seen := map[uint64]int{}
	for rank := range world {
		shard := d.shard(actors.Shard{Rank: rank, World: world, Remainder: order.Pad})
		p, err := actors.New(d.stages(2, shard), actors.Options{System: sharedSys, GroupSize: 8, Resume: states, Shard: shard})
		if err != nil {
			return nil, err
		}
		if st, _ := p.State(); st.Epoch == firstEpoch(states) {
			readPass(t, ctx, p, func(it actors.Item) {
				for _, id := range it.IDs[:it.Instances-it.Padding] {
					seen[id]++
				}
			})
		}
		closeAndCheck(t, p, sharedSys)
	}
	return seen, nil
}

// deliveredBy is what the ranks of accepted states delivered: each old
// rank's batches before its position and those listed past it, read again
// from the state's layout.
func deliveredBy(t *testing.T, ctx context.Context, d dataSet, states []actors.State) map[uint64]bool {
	out := map[uint64]bool{}
	first := slices.IndexFunc(states, func(st actors.State) bool { return st.Epoch == firstEpoch(states) })
	for _, st := range states {
		if st.Epoch > states[first].Epoch { // it finished its share of the first's epoch
			rank := st.Rank
			st = states[first]
			st.Rank, st.Done, st.Beyond = rank, math.MaxUint64, nil
		}
		from := st
		from.Done, from.Beyond = 0, nil
		shard := d.shard(actors.Shard{Rank: st.Rank, World: st.Layout.World, Remainder: order.Pad})
		p, err := actors.New(d.stages(2, shard), actors.Options{System: sharedSys, GroupSize: 8, Resume: []actors.State{from}, Shard: shard})
		require.NoError(t, err)
		readPass(t, ctx, p, func(it actors.Item) {
			start := (uint64(it.Index) - st.Layout.FirstStep) * uint64(st.Unit) // a global batch numbers its steps on
			if start < st.Done || slices.Contains(st.Beyond, start) {
				for _, id := range it.IDs[:it.Instances-it.Padding] {
					out[id] = true
				}
			}
		})
		closeAndCheck(t, p, sharedSys)
	}
	return out
}

func firstEpoch(states []actors.State) int {
	return slices.MinFunc(states, func(a, b actors.State) int { return cmp.Compare(a.Epoch, b.Epoch) }).Epoch
}

// A rank stopped before its pipeline was built leaves a fresh state: with
// the other ranks' states, the job resumes on another world exactly; alone,
// it starts afresh.
func TestFreshStateJoinsTheOthers(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 40, 300)
	states := jobStates(t, ctx, dataSet{paths: paths}, 2, order.Pad, []int{2, 0})
	states[1] = actors.FreshState(actors.Shard{Rank: 1, World: 2})
	got, err := resumeJob(t, ctx, dataSet{paths: paths}, states, 3)
	require.NoError(t, err)
	before := deliveredBy(t, ctx, dataSet{paths: paths}, states[:1])
	for id := range before {
		require.Zero(t, got[id], "sample %x delivered again", id)
		got[id]++
	}
	require.Len(t, got, 80)

	alone, err := resumeJob(t, ctx, dataSet{paths: paths}, []actors.State{actors.FreshState(actors.Shard{})}, 1)
	require.NoError(t, err)
	require.Len(t, alone, 80, "the whole epoch")
}

// Devices.Steps stops the devices after that many batches: Run returns
// nil, Stopped says so, the state is final without Close, and resuming
// from it delivers the rest of the epoch, each batch once.
func TestStepsStopTheDevicesWithAFinalState(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	var mu sync.Mutex
	seen := map[uint64]int{}
	step := func(_ context.Context, it actors.Item) error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range it.IDs {
			seen[id]++
		}
		return nil
	}
	p, err := actors.NewDevices(ordered(paths, 2), actors.Devices{N: 3, Steps: 5, Step: step}, actors.Options{System: sharedSys, GroupSize: 8})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	require.True(t, p.Stopped())
	st, err := p.State()
	require.NoError(t, err)
	stepped := 0
	for _, d := range p.Stats().Devices {
		stepped += d.Batches
	}
	require.Equal(t, 5, stepped)
	require.NoError(t, p.Run(ctx), "a stopped pipeline steps nothing more")
	closeAndCheck(t, p, sharedSys)
	final, err := p.State()
	require.NoError(t, err)
	require.Equal(t, st, final, "the state taken when Run returned is final")

	p, err = actors.NewDevices(ordered(paths, 2), actors.Devices{N: 2, Step: step}, actors.Options{System: sharedSys, GroupSize: 8,
		Resume: []actors.State{st}})
	require.NoError(t, err)
	require.NoError(t, p.RunEpochs(ctx, 1))
	require.False(t, p.Stopped())
	closeAndCheck(t, p, sharedSys)
	require.Len(t, seen, 210)
	for id, k := range seen {
		require.Equal(t, 1, k, "sample %x", id)
	}
}

// Resuming costs in proportion to the data, not to what a state claims: a
// layout of 4,000 one-position ranges (every other position of 8,000) is
// read about once, where each range read its whole window before (a
// crafted state of 10,000 such ranges took 6.9 s over 20,000 records).
func TestManyRangesAreReadOnce(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 2000, 2000)
	open, read, size := countedOpen(t, paths)
	stages := []actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Shuffle{Window: 1024, Seed: 3}, actors.Batch{Size: 16}}
	p, err := actors.New(stages, actors.Options{System: sharedSys})
	require.NoError(t, err)
	st, err := p.State()
	require.NoError(t, err)
	closeAndCheck(t, p, sharedSys)
	st.Layout.Ranges = nil
	for i := range uint64(4000) {
		st.Layout.Ranges = append(st.Layout.Ranges, order.Range{Lo: 2 * i, Hi: 2*i + 1})
	}
	p, err = actors.New(stages, actors.Options{System: sharedSys, Open: open, Resume: []actors.State{st}})
	require.NoError(t, err)
	read.Store(0)
	require.Len(t, readPass(t, ctx, p, nil), 4000)
	closeAndCheck(t, p, sharedSys)
	require.LessOrEqual(t, read.Load(), size+size/4, "a pass reads about the files' %d bytes", size)
}

// FuzzDecodeState: any bytes decode to a state that checks, or to an
// error wrapping ErrState; never a panic. A state that decodes encodes
// and decodes back to itself.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"version":1,"seed":1,"window":1024,"shuffled":true,"unit":64,"remainder":"drop","data":{"files":2,"records":2000,"splits":2,"sum":"61fc"},"epoch":0,"layout":{"world":1,"ranges":[{"lo":0,"hi":2000}]},"rank":0,"done":320}`))
	f.Add([]byte(`{"version":1,"seed":1,"window":1024,"shuffled":true,"unit":64,"remainder":"drop","data":{"files":2,"records":2000,"splits":2,"sum":"61fc"},"epoch":4611686018427387904,"layout":{"world":1,"ranges":[{"lo":0,"hi":2000}]},"rank":0,"done":320}`))
	f.Add([]byte(`{"version":1,"fresh":true,"layout":{"world":3},"rank":2}`))
	f.Add([]byte(`{"version":1,"seed":1,"window":1,"shuffled":true,"global":true,"unit":4,"remainder":"drop","data":{"files":2,"records":2000,"splits":2,"sum":"61fc"},"epoch":0,"layout":{"world":3,"ranges":[{"lo":40,"hi":2000}],"global_batch":10,"first_step":4},"rank":0,"done":8}`))
	f.Add([]byte(`{"version":1,"seed":1,"window":1,"shuffled":true,"global":true,"unit":3,"remainder":"pad","data":{"files":2,"records":2000,"splits":2,"sum":"61fc"},"epoch":0,"layout":{"world":3,"ranges":[{"lo":0,"hi":2000}],"global_batch":18446744073709551615},"rank":2,"done":3}`))
	f.Add([]byte(`{"version":1,"epoch":18446744073709551616}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := actors.DecodeState(b)
		if err != nil {
			require.ErrorIs(t, err, actors.ErrState)
			return
		}
		require.NoError(t, st.Check())
		again, err := json.Marshal(st)
		require.NoError(t, err)
		back, err := actors.DecodeState(again)
		require.NoError(t, err)
		require.Equal(t, st.Epoch, back.Epoch)
		require.Equal(t, st.Done, back.Done)
		require.Equal(t, st.Layout, back.Layout)
	})
}
