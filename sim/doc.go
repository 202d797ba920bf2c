// Package sim is actorfeed's proving ground: it runs pipelines under
// seeded, replayable fault schedules and checks that they keep the
// runtime's promises (docs/reliability.md).
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
// counted), the fault-free order in the order, an error naming
// the stage and cause when one is due and before the deadline, live
// batches within the configured bound, and no goroutine or actor left
// after shutdown. Generate draws random scenarios; the same seed gives the
// same scenario, fault schedule and verdict.
//
// GeneratePreemption draws jobs of several ranks that are stopped or
// killed (ranks at different steps, checkpoints of different ages) and
// resumed from all their states (Scenario.Preempt), perhaps as another
// number of ranks, several times; PreemptRegressions are named ones. Run
// then checks each epoch's samples exactly once across the ranks, equal
// shares, and every batch against the uninterrupted run of its world
// (docs/determinism.md).
//
// The data service's scenarios under network faults are sim/netsim's.
//
// A user's own questions take a Schedule (ParseSchedule: faults by target
// and kind, each in a window of time, seeded; docs/simulation.md) and run
// their own program under it: WhatIf runs a program N times, and reports
// throughput, the devices' busy fractions and data waits, what the faults
// injected and the invariant verdict, with ratios to a run without faults.
// The same pieces serve a trainer's own tests: an Injector wraps a
// pipeline's files, stages and device steps; a Ledger checks exactly once
// against a fault-free run; a LeakCheck finds goroutines and actors left.
//
// sim may import every package except cmd, the harnesses and the remote
// (actors/service).
package sim
