// Package scenario is actorfeed's proving ground: it runs pipelines under
// seeded, replayable fault scenarios and checks that they keep the
// runtime's promises (docs/reliability.md). It is ours, not a user's API:
// a user asks sim's WhatIf about their own pipeline.
//
// A Scenario is a pipeline Shape, a list of Faults and a seed. Faults are
// injected at three places: the file system under the file readers (errors
// on the Nth read or with probability p, latency, short reads, stalled
// reads, flipped bytes in a chunk, a truncated file), the actors (a panic
// at the Nth message of a stage kind, or a storm of them past the restart
// intensity) and the devices (slow or stalled steps, a panicking step).
// Run executes a scenario with a deadline and checks the invariants from
// the ledger of the samples the devices consumed: each sample exactly once
// per pass (under the skip policy: exactly the corrupted ones missing, and
// counted), the fault-free order, an error naming the stage and cause when
// one is due and before the deadline, live batches within the configured
// bound, and no goroutine or actor left after shutdown. Generate draws
// random scenarios; the same seed gives the same scenario, fault schedule
// and verdict.
//
// GeneratePreemption draws jobs of several ranks that are stopped or
// killed (ranks at different steps, checkpoints of different ages) and
// resumed from all their states (Scenario.Preempt), perhaps as another
// number of ranks, several times; PreemptRegressions are named ones. Run
// then checks each epoch's samples exactly once across the ranks, equal
// shares, and every batch against the uninterrupted run of its world
// (docs/determinism.md).
//
// scenario imports sim (its verdicts and fault kinds) and what sim
// imports; not cmd, the harnesses or the remote.
package scenario
