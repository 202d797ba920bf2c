package scenario_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/scenario"
)

func requirePass(t *testing.T, sc scenario.Scenario) scenario.Result {
	t.Helper()
	res := scenario.Run(context.Background(), sc, scenario.Options{})
	require.Equal(t, sim.Pass, res.Verdict, "%s (seed %d): %s; faults %s: %v (error %v)",
		sc.Name, sc.Seed, sc.Describe(), sc.DescribeFaults(), res.Violations, res.Err)
	return res
}

func TestRegressions(t *testing.T) {
	for _, sc := range scenario.Regressions() {
		t.Run(sc.Name, func(t *testing.T) { requirePass(t, sc) })
	}
}

// The CLI's CI step runs hundreds more; under the race detector a sample.
func TestGeneratedScenarios(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		requirePass(t, scenario.Generate(seed))
	}
}

func TestReplayGivesTheSameScheduleAndVerdict(t *testing.T) {
	for _, seed := range []uint64{7, 42, 1234} {
		a, b := scenario.Generate(seed), scenario.Generate(seed)
		require.Equal(t, a, b, "seed %d", seed)
		ra, rb := requirePass(t, a), requirePass(t, b)
		require.Equal(t, ra.Verdict, rb.Verdict)
		// Faults that fire by count fire the same number of times.
		for _, k := range []sim.FaultKind{sim.ReadError, sim.ShortRead, sim.StallRead, sim.StallDevice, sim.PanicDevice} {
			require.Equal(t, ra.Fired[k], rb.Fired[k], "seed %d: %s", seed, k)
		}
	}
	require.NotEqual(t, scenario.Generate(1), scenario.Generate(2))
}

// A damaged file under the fail policy ends the run with an error, and the
// checker expects exactly that.
func TestDamageUnderFailPolicyIsAnError(t *testing.T) {
	sc := scenario.Regressions()[0]
	sc.Faults = []scenario.Fault{{Kind: sim.FlipChunk, File: 0, Chunk: 0}}
	res := requirePass(t, sc)
	require.Error(t, res.Err)
}

// Preempted jobs: the CLI's CI step runs a thousand; here a sample, and the
// seeds whose scenarios found bugs (sim --preempt): 5, a state that forgot
// the batches committed past its position once resumed; 1403, a group of
// holes reaching into a window the shuffle stage had not opened, which then
// never completed; 195, 692 and 1132, the simulator's own stops re-dealt to
// other ranks; in global batches, 118 and 286, the simulator's stops and
// checkpoints counting a re-dealt epoch's batches from 0 (a hang, a kept
// batch counted lost), and 102, a padded last step filled from the
// re-dealt layout's first samples, not the uninterrupted job's.
func TestPreemptedScenarios(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 102, 118, 195, 286, 450, 692, 827, 1132, 1403} {
		sc := scenario.GeneratePreemption(seed)
		require.NotNil(t, sc.Preempt)
		requirePass(t, sc)
	}
	require.Equal(t, scenario.GeneratePreemption(9), scenario.GeneratePreemption(9), "a seed is a scenario")
}

// The named preempted jobs pass: each found a bug of a resized job or of
// the checker that judges one.
func TestPreemptRegressions(t *testing.T) {
	for _, sc := range scenario.PreemptRegressions() {
		t.Run(sc.Name, func(t *testing.T) { requirePass(t, sc) })
	}
}

// A third of the preempted jobs whose order reads no window are dealt in
// global batches, each at least the largest world (4).
func TestPreemptedJobsTakeGlobalBatches(t *testing.T) {
	global, eligible := 0, 0
	for seed := uint64(1); seed <= 600; seed++ {
		sh := scenario.GeneratePreemption(seed).Shape
		if sh.Shuffle > 1 {
			require.Zero(t, sh.GlobalBatch, "seed %d: a global batch over a shuffle window", seed)
			continue
		}
		eligible++
		if sh.GlobalBatch > 0 {
			global++
			require.GreaterOrEqual(t, sh.GlobalBatch, 4, "seed %d", seed)
		}
	}
	require.InDelta(t, 1.0/3, float64(global)/float64(eligible), 0.08, "%d of %d", global, eligible)
}

// A sixth of the scenarios read token corpora, some of them in the global
// order and in global batches, their reads under faults but their bytes
// undamaged.
func TestScenariosReadTokenCorpora(t *testing.T) {
	tokens, global, globalBatch, reads := 0, 0, 0, 0
	for seed := uint64(1); seed <= 600; seed++ {
		sc := scenario.GeneratePreemption(seed)
		if sc.Shape.Format != "megatron" {
			continue
		}
		tokens++
		global += btoi(sc.Shape.Global)
		globalBatch += btoi(sc.Shape.GlobalBatch > 0)
		for _, f := range sc.Faults {
			require.NotContains(t, []sim.FaultKind{sim.FlipChunk, sim.Truncate}, f.Kind, "seed %d", seed)
			reads += btoi(f.Kind == sim.StallRead || f.Kind == sim.ReadError || f.Kind == sim.ShortRead)
		}
	}
	require.InDelta(t, 1.0/6, float64(tokens)/600, 0.05)
	require.Positive(t, global)
	require.Positive(t, globalBatch)
	require.Positive(t, reads, "read faults on token corpora")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Half the preempted jobs over several token corpora in an order without a
// window blend them, and some of those in global batches reverse their
// weights at a global step (a curriculum change).
func TestPreemptedJobsBlendTokenCorpora(t *testing.T) {
	blends, turned, eligible := 0, 0, 0
	for seed := uint64(1); seed <= 1000; seed++ {
		sh := scenario.GeneratePreemption(seed).Shape
		if sh.Format != "megatron" || sh.Files < 2 || sh.Shuffle > 1 || sh.AnyOrder {
			require.Empty(t, sh.Blend, "seed %d", seed)
			continue
		}
		eligible++
		if len(sh.Blend) == 0 {
			continue
		}
		blends++
		require.Len(t, sh.Blend, sh.Files, "seed %d", seed)
		if sh.BlendStep > 0 {
			turned++
			require.Positive(t, sh.GlobalBatch, "seed %d: a curriculum's step is a global step", seed)
		}
	}
	t.Logf("%d of %d eligible jobs blend, %d of them reverse their weights", blends, eligible, turned)
	require.InDelta(t, 0.5, float64(blends)/float64(eligible), 0.15, "%d of %d", blends, eligible)
	require.Positive(t, turned)
}
