// Package faults holds the fault-injection hook of the actor runtime, which
// only the simulator and tests use: an internal type, so that package
// actors' documentation lists what a trainer uses.
package faults

// Injector sees every protocol message before its stage handles it, with
// the stage's name and kind and the message's number (from 1) at that
// stage; it may panic to simulate a crash. Counts survive restarts, so a
// fault scheduled at message n fires once. It is the type of
// actors.Options.Faults; package sim has the injectors (sim.PanicAt,
// sim.Faults).
type Injector interface {
	BeforeMessage(stage, kind string, n int64, msg any)
}
