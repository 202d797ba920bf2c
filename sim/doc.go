// Package sim asks what faults cost a user's own pipeline, and checks that
// it keeps the runtime's promises under them (docs/simulation.md).
//
// A Schedule (ParseSchedule: faults by target and kind, each in a window
// of time, seeded) is injected by an Injector at three places: the files
// under the file readers (errors on the Nth read or with probability p,
// latency, short, stalled and truncated reads, flipped bytes), the stages
// (a panic at the Nth message of a stage kind) and the devices (slow,
// stalled or panicking steps). WhatIf runs a program N times under a
// schedule and reports throughput, the devices' busy fractions and data
// waits, what the faults injected and the invariant verdict, with ratios
// to a run without faults. The same pieces serve a trainer's own tests: a
// Ledger checks exactly once against a fault-free run; a LeakCheck finds
// goroutines and actors left.
//
// actorfeed's own proving ground, generated and replayed scenarios, is
// sim/scenario; the data service's under network faults sim/netsim; reads
// of s3:// objects under an object store's faults sim/objsim.
//
// sim may import every package except cmd, the harnesses, the remote
// (package service) and its own scenario harnesses.
package sim
