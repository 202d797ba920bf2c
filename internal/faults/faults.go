// Package faults holds the fault-injection hook of the actor runtime, which
// only the simulator and tests use: an internal type, so that package
// actors' documentation lists what a trainer uses.
package faults

import "fmt"

// Injector sees every protocol message before its stage handles it, with
// the stage's name and kind and the message's number (from 1) at that
// stage; it may panic to simulate a crash. Counts survive restarts, so a
// fault scheduled at message n fires once. It is the type of
// actors.Options.Faults; PanicAt is the one tests use, and package sim
// schedules it.
type Injector interface {
	BeforeMessage(stage, kind string, n int64, msg any)
}

// PanicAt panics the N-th message of every stage that matches Stage (by
// name) or Kind, whichever is set.
type PanicAt struct {
	Stage, Kind string
	N           int64
}

// BeforeMessage implements Injector.
func (p PanicAt) BeforeMessage(stage, kind string, n int64, _ any) {
	if n == p.N && (p.Stage == "" || p.Stage == stage) && (p.Kind == "" || p.Kind == kind) {
		panic(fmt.Sprintf("injected panic at message %d of %s", n, stage))
	}
}
