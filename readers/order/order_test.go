package order_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/order"
)

// randomSplits is a data set of 1-5 files cut into splits of 1-50 records.
func randomSplits(rng *rand.Rand) []order.Split {
	var out []order.Split
	for f := range 1 + rng.IntN(5) {
		var at uint64
		for range 1 + rng.IntN(6) {
			n := uint64(1 + rng.IntN(50))
			out = append(out, order.Split{File: f, First: at, Count: n})
			at += n
		}
	}
	return out
}

type rec struct {
	file int
	r    uint64
}

// sequence is G for rank's segments, record by record, read the way a
// pipeline does: job by job, pieces in order, then permuted.
func sequence(t *testing.T, ep *order.Epoch, segs []order.Segment) []rec {
	var out []rec
	jobs := ep.Jobs(segs)
	var at uint64
	for {
		job, ok := jobs.Next()
		if !ok {
			return out
		}
		var window []rec
		for _, p := range ep.Pieces(job.Start, job.Start+uint64(job.Len)) {
			require.Equal(t, job.Start+uint64(len(window)), p.Pos, "pieces come in S order")
			for r := p.From; r < p.To; r++ {
				window = append(window, rec{p.File, r})
			}
		}
		require.Len(t, window, job.Len)
		perm := ep.Perm(job.Window)
		for _, p := range append([]order.Part{job.Part}, job.More...) {
			require.Equal(t, at, p.At)
			at += uint64(p.Hi - p.Lo)
			for i := p.Lo; i < p.Hi; i++ {
				out = append(out, window[perm[i]])
			}
		}
	}
}

func all(splits []order.Split) []rec {
	var out []rec
	for _, s := range splits {
		for r := s.First; r < s.First+s.Count; r++ {
			out = append(out, rec{s.File, r})
		}
	}
	return out
}

func sortRecs(rs []rec) []rec {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b rec) int {
		if a.file != b.file {
			return a.file - b.file
		}
		return int(a.r) - int(b.r)
	})
	return rs
}

func TestAnEpochIsAPermutationOfTheDataSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		splits := randomSplits(rng)
		o, err := order.New(splits, order.Config{Seed: rng.Uint64(), Shuffle: rng.IntN(4) > 0, Window: rng.IntN(70)})
		require.NoError(t, err)
		ep := o.Epoch(uint64(rng.IntN(5)))
		g := sequence(t, ep, order.Full(o.Len(), 1, 0).Cut(0, order.Drop, 0))
		require.Equal(t, sortRecs(all(splits)), sortRecs(g))
		for i, r := range g {
			f, x := ep.At(uint64(i))
			require.Equal(t, r, rec{f, x}, "At agrees with the jobs")
		}
		require.Equal(t, g, sequence(t, o.Epoch(ep.Number()), order.Full(o.Len(), 1, 0).Cut(0, order.Drop, 0)), "an epoch is a pure function")
	}
}

func TestEpochsAndSeedsDiffer(t *testing.T) {
	splits := []order.Split{{0, 0, 100}, {0, 100, 100}, {1, 0, 100}, {1, 100, 100}}
	o1, _ := order.New(splits, order.Config{Seed: 7, Shuffle: true, Window: 64})
	o2, _ := order.New(splits, order.Config{Seed: 8, Shuffle: true, Window: 64})
	whole := order.Full(400, 1, 0).Cut(0, order.Drop, 0)
	e0 := sequence(t, o1.Epoch(0), whole)
	require.NotEqual(t, e0, sequence(t, o1.Epoch(1), whole))
	require.NotEqual(t, e0, sequence(t, o2.Epoch(0), whole))
	require.NotEqual(t, all(splits), e0, "shuffled")
}

func TestWindowOneKeepsRecordsInSplitOrder(t *testing.T) {
	splits := []order.Split{{0, 0, 10}, {0, 10, 10}, {1, 0, 10}}
	o, _ := order.New(splits, order.Config{Seed: 3, Shuffle: true, Window: 1})
	g := sequence(t, o.Epoch(0), order.Full(30, 1, 0).Cut(0, order.Drop, 0))
	for i := 1; i < len(g); i++ {
		if g[i].file == g[i-1].file && g[i].r != g[i-1].r+1 {
			require.Zero(t, g[i].r%10, "a jump happens only at a split's start: %v", g)
		}
	}
}

// shards are every rank's delivered positions, and how many were padding.
func shards(l order.Layout, rem order.Remainder, done uint64) (got [][]uint64, pads int) {
	for r := range l.World {
		var ps []uint64
		for _, s := range l.Cut(r, rem, done) {
			for p := s.Lo; p < s.Hi; p++ {
				if s.Pad {
					pads++
				}
				ps = append(ps, p)
			}
		}
		got = append(got, ps)
	}
	return got, pads
}

func TestShardsAreEqualDisjointAndCoverTheEpoch(t *testing.T) {
	for n := uint64(0); n < 40; n++ {
		for world := 1; world <= 7; world++ {
			l := order.Full(n, world, 0)
			drop, pads := shards(l, order.Drop, 0)
			require.Zero(t, pads)
			seen := map[uint64]bool{}
			for _, s := range drop {
				require.Len(t, s, int(n)/world, "n=%d world=%d", n, world)
				for _, p := range s {
					require.False(t, seen[p], "disjoint")
					seen[p] = true
				}
			}
			require.Len(t, seen, int(n)/world*world, "only the remainder is dropped")

			pad, pads := shards(l, order.Pad, 0)
			seen = map[uint64]bool{}
			for _, s := range pad {
				require.Len(t, s, int((n+uint64(world)-1)/uint64(world)))
				for _, p := range s {
					seen[p] = true
				}
			}
			require.Len(t, seen, int(n), "padding repeats, and every position is dealt")
			require.Equal(t, int(l.Share(0, order.Pad))*world-int(n), pads)
		}
	}
}

// Part way through an epoch, every rank has delivered done positions; the
// rest dealt among another number of ranks delivers every position not yet
// delivered exactly once (padding aside).
func TestRegroupAtOneStepDealsWhatIsLeftOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		n := uint64(rng.IntN(300))
		l := randomLayout(rng, n, i%2 == 0)
		delivered := map[uint64]int{}
		for range 1 + rng.IntN(3) { // several preemptions in one epoch
			progress := make([]order.Progress, l.World)
			var steps uint64
			if l.GlobalBatch > 0 {
				steps = uint64(rng.IntN(int(l.Steps(order.Pad)) + 1))
			} else if share := l.Share(0, order.Pad); share > 0 {
				progress[0].Done = uint64(rng.IntN(int(share) + 1))
			}
			for r := range l.World {
				if l.GlobalBatch > 0 { // a synchronous trainer's ranks stop at one step
					_, b := order.StepSlice(l.GlobalBatch, l.World, r)
					progress[r].Done = steps * b
				} else {
					progress[r].Done = progress[0].Done
				}
				var k uint64
				for _, s := range l.Cut(r, order.Pad, 0) {
					for p := s.Lo; p < s.Hi && k < progress[r].Done; p++ {
						if !s.Pad {
							delivered[p]++
						}
						k++
					}
				}
			}
			l = l.Regroup(order.Pad, 1, progress, randomWorld(rng, l.GlobalBatch))
			require.NoError(t, l.Check(n))
		}
		requireOnce(t, l, delivered, n)
	}
}

// randomLayout is a whole epoch of n positions among 1 to 8 ranks, with a
// global batch of up to 4 positions a rank when stepped.
func randomLayout(rng *rand.Rand, n uint64, stepped bool) order.Layout {
	world := 1 + rng.IntN(8)
	var g uint64
	if stepped {
		g = uint64(world + rng.IntN(3*world+1))
	}
	return order.Full(n, world, g)
}

// randomWorld is a world of 1 to 8 ranks that a global batch g (0: none)
// leaves every rank a position of.
func randomWorld(rng *rand.Rand, g uint64) int {
	if g > 0 {
		return 1 + rng.IntN(int(min(g, 8)))
	}
	return 1 + rng.IntN(8)
}

func TestCheckRefusesBadLayouts(t *testing.T) {
	require.Error(t, order.Layout{World: 0}.Check(10))
	require.Error(t, order.Layout{World: 1, Ranges: []order.Range{{5, 3}}}.Check(10))
	require.Error(t, order.Layout{World: 1, Ranges: []order.Range{{0, 11}}}.Check(10))
	require.Error(t, order.Layout{World: 1, Ranges: []order.Range{{4, 6}, {5, 7}}}.Check(10))
	require.NoError(t, order.Layout{World: 2, Ranges: []order.Range{{0, 3}, {5, 7}}}.Check(10))
	_, err := order.New(nil, order.Config{Window: order.MaxWindow + 1})
	require.ErrorIs(t, err, order.ErrBadOrder)
}

// Ranks stop at different steps, each having committed a few items past
// its position too (devices commit out of order); the rest regrouped among
// another number of ranks, several times in one epoch, delivers every
// position that no rank delivered exactly once (padding aside), and the
// layout does not grow with the positions.
func TestRegroupDeliversWhatNoRankDeliveredOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 1000 {
		n := uint64(rng.IntN(2000))
		unit := uint64(1 + rng.IntN(16))
		l := randomLayout(rng, n, i%2 == 0)
		delivered := map[uint64]int{}
		for range 1 + rng.IntN(4) { // resized several times in one epoch
			progress := make([]order.Progress, l.World)
			stepsApart := uint64(0)
			for r := range progress {
				share, u := l.Share(r, order.Pad), unit
				if l.GlobalBatch > 0 {
					_, u = order.StepSlice(l.GlobalBatch, l.World, r)
				}
				items := (share + u - 1) / u
				k := uint64(rng.IntN(int(items) + 1))
				stepsApart = max(stepsApart, items-k)
				pr := order.Progress{Done: min(k*u, share)}
				for j := k + 1; j < items && len(pr.Beyond) < 3; j++ {
					if rng.IntN(3) == 0 {
						pr.Beyond = append(pr.Beyond, j*u)
					}
				}
				progress[r] = pr
				for _, s := range l.Cut(r, order.Pad, 0) {
					for p := s.Lo; p < s.Hi; p++ {
						at := s.At + (p - s.Lo)
						if s.Pad || !committed(pr, at, u) {
							continue
						}
						delivered[p]++
					}
				}
			}
			ranges := len(l.Ranges)
			stepped := l.GlobalBatch > 0
			l = l.Regroup(order.Pad, unit, progress, randomWorld(rng, l.GlobalBatch))
			require.NoError(t, l.Check(n))
			bound := ranges + len(progress)*4
			if stepped {
				bound += int(stepsApart) * len(progress)
			}
			require.LessOrEqual(t, len(l.Ranges), bound, "the layout grows with ranks and items ahead only")
		}
		requireOnce(t, l, delivered, n)
	}
}

// requireOnce checks that the positions l deals (padding aside) and those
// delivered before make each of the n positions once.
func requireOnce(t *testing.T, l order.Layout, delivered map[uint64]int, n uint64) {
	t.Helper()
	final, _ := shards(l, order.Pad, 0)
	seenNow := map[uint64]bool{}
	for _, s := range final {
		for _, p := range s {
			seenNow[p] = true
		}
	}
	for p := range seenNow {
		delivered[p]++
	}
	require.Len(t, delivered, int(n))
	for p, k := range delivered {
		require.Equal(t, 1, k, "position %d", p)
	}
}

// committed says whether rank position at was delivered by a rank with
// progress pr.
func committed(pr order.Progress, at, unit uint64) bool {
	if at < pr.Done {
		return true
	}
	for _, b := range pr.Beyond {
		if at >= b && at < b+unit {
			return true
		}
	}
	return false
}

func TestRegroupOfManyRangesIsFast(t *testing.T) {
	l := order.Layout{World: 4096}
	for i := range uint64(100_000) {
		l.Ranges = append(l.Ranges, order.Range{Lo: 2 * i, Hi: 2*i + 1})
	}
	progress := make([]order.Progress, l.World)
	got := l.Regroup(order.Drop, 1, progress, 3) // quadratic, this takes minutes
	require.Equal(t, l.Share(0, order.Drop)*4096, got.Total())
}

// A layout of many small ranges (a job re-dealt with holes, or a hostile
// state) is read a window at a time: the segments that fall in a window
// one after another are one job, so no window is read twice.
func TestJobsReadEachWindowOnceOverManyRanges(t *testing.T) {
	splits := []order.Split{{0, 0, 5000}, {1, 0, 5000}}
	o, err := order.New(splits, order.Config{Seed: 1, Shuffle: true, Window: 1024})
	require.NoError(t, err)
	l := order.Layout{World: 1}
	for i := range uint64(5000) {
		l.Ranges = append(l.Ranges, order.Range{Lo: 2 * i, Hi: 2*i + 1})
	}
	segs := l.Cut(0, order.Drop, 0)
	windows := map[uint64]bool{}
	jobs := o.Epoch(0).Jobs(segs)
	for job, ok := jobs.Next(); ok; job, ok = jobs.Next() {
		require.False(t, windows[job.Window], "window %d read twice", job.Window)
		windows[job.Window] = true
	}
	require.Len(t, windows, 10)
	got := sequence(t, o.Epoch(0), segs)
	whole := sequence(t, o.Epoch(0), order.Full(10000, 1, 0).Cut(0, order.Drop, 0))
	for i, r := range got {
		require.Equal(t, whole[2*i], r, "position %d", 2*i)
	}
}

func TestRecordsAreAt(t *testing.T) {
	splits := []order.Split{{0, 0, 300}, {1, 0, 200}}
	o, err := order.New(splits, order.Config{Seed: 4, Shuffle: true, Window: 64})
	require.NoError(t, err)
	ep := o.Epoch(2)
	g := uint64(37)
	ep.Records(order.Range{Lo: 37, Hi: 400}, func(file int, record uint64) {
		f, r := ep.At(g)
		require.Equal(t, [2]uint64{uint64(f), r}, [2]uint64{uint64(file), record}, "position %d", g)
		g++
	})
	require.EqualValues(t, 400, g)
}

func TestDroppedIsTheRemainderNoRankGets(t *testing.T) {
	l := order.Layout{World: 3, Ranges: []order.Range{{0, 5}, {10, 16}}} // 11 positions: 3 each, 2 left
	require.Equal(t, []order.Range{{14, 16}}, l.Dropped(order.Drop))
	require.Empty(t, l.Dropped(order.Pad))
	got, _ := shards(l, order.Drop, 0)
	for _, s := range got {
		require.NotContains(t, s, uint64(14))
		require.NotContains(t, s, uint64(15))
	}
}

// steps are the sets of G positions of each global step of l, as its
// ranks deliver them: rank r's k-th item of its slice's length.
func steps(t *testing.T, l order.Layout, rem order.Remainder) [][]uint64 {
	t.Helper()
	var out [][]uint64
	for r := range l.World {
		_, b := order.StepSlice(l.GlobalBatch, l.World, r)
		var at uint64
		for _, s := range l.Cut(r, rem, 0) {
			for p := s.Lo; p < s.Hi; p, at = p+1, at+1 {
				k := int(at / b)
				for len(out) <= k {
					out = append(out, nil)
				}
				out[k] = append(out[k], p)
			}
		}
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}

// Global step k is positions [kG, (k+1)G) of the epoch whatever the
// number of ranks; the ranks' slices differ by one at most; under Drop the
// last partial step is left out (Dropped), under Pad it is filled up with
// repeats of its own positions.
func TestGlobalStepsAreTheSameWhateverTheWorld(t *testing.T) {
	for n := uint64(1); n < 60; n += 7 {
		for g := uint64(1); g <= 9; g++ {
			for world := 1; world <= int(g); world++ {
				l := order.Layout{World: world, GlobalBatch: g, Ranges: []order.Range{{0, n / 2}, {n/2 + 3, n + 3}}}
				// C position i, as the first of one rank's shard from i on.
				cPos := func(i uint64) uint64 { return (order.Layout{World: 1, Ranges: l.Ranges}).Cut(0, order.Drop, i)[0].Lo }
				drop := steps(t, l, order.Drop)
				require.Len(t, drop, int(n/g), "n=%d g=%d world=%d", n, g, world)
				for k, s := range drop {
					var want []uint64
					for i := uint64(k) * g; i < uint64(k+1)*g; i++ {
						want = append(want, cPos(i))
					}
					require.Equal(t, want, s, "step %d", k)
				}
				left := uint64(0)
				for _, r := range l.Dropped(order.Drop) {
					left += r.Len()
				}
				require.Equal(t, n%g, left)
				pad := steps(t, l, order.Pad)
				require.Len(t, pad, int((n+g-1)/g))
				for _, s := range pad {
					require.Len(t, s, int(g))
				}
				if n%g != 0 { // the padded step repeats its own positions
					var own []uint64
					for i := n / g * g; i < n; i++ {
						own = append(own, cPos(i))
					}
					for _, p := range pad[len(pad)-1] {
						require.Contains(t, own, p, "n=%d g=%d world=%d", n, g, world)
					}
				}
				for r := range world {
					_, b := order.StepSlice(g, world, r)
					require.LessOrEqual(t, b, g/uint64(world)+1)
					require.GreaterOrEqual(t, b, g/uint64(world))
					require.Equal(t, uint64(len(pad))*b, l.Share(r, order.Pad))
				}
			}
		}
	}
}

// A job stopped at global step s and re-dealt to another number of ranks
// delivers step s+k of the old layout as its step k, a padded last step
// with the same repeats.
func TestRegroupAtAStepKeepsTheSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		n := uint64(rng.IntN(400))
		l := randomLayout(rng, n, true)
		for _, rem := range []order.Remainder{order.Drop, order.Pad} {
			before := steps(t, l, rem)
			s := uint64(rng.IntN(len(before) + 1))
			progress := make([]order.Progress, l.World)
			for r := range progress {
				_, b := order.StepSlice(l.GlobalBatch, l.World, r)
				progress[r].Done = s * b
			}
			after := l.Regroup(rem, 1, progress, randomWorld(rng, l.GlobalBatch))
			require.NoError(t, after.Check(n))
			got := steps(t, after, rem)
			require.Equal(t, len(before[s:]), len(got))
			for k := range got {
				require.Equal(t, before[int(s)+k], got[k], "step %d after the stop", k)
			}
		}
	}
}

// A rank of a global batch reads only its slices of an order that permutes
// no record: its jobs span its share, not every window (each of World
// ranks would read the whole epoch).
func TestJobsOfAGlobalBatchReadOnlyTheSlices(t *testing.T) {
	for _, c := range []order.Config{{Global: true, Files: 1}, {}} {
		o, err := order.New([]order.Split{{File: 0, Count: 10_000}}, c)
		require.NoError(t, err)
		l := order.Full(o.Len(), 4, 30)
		for r := range 4 {
			jobs := o.Epoch(0).JobsOf(l.Walk(r, order.Drop, 0))
			var read uint64
			for j, ok := jobs.Next(); ok; j, ok = jobs.Next() {
				read += uint64(j.Len)
			}
			require.Equal(t, l.Share(r, order.Drop), read, "rank %d of %+v", r, c)
		}
	}
}
