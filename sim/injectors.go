package sim

import (
	"fmt"

	"github.com/actorfeed/actorfeed/internal/faults"
)

// PanicAt panics the N-th message of every stage that matches Stage (by
// name) or Kind, whichever is set.
type PanicAt struct {
	Stage, Kind string
	N           int64
}

// BeforeMessage implements faults.Injector.
func (p PanicAt) BeforeMessage(stage, kind string, n int64, _ any) {
	if n == p.N && (p.Stage == "" || p.Stage == stage) && (p.Kind == "" || p.Kind == kind) {
		panic(fmt.Sprintf("injected panic at message %d of %s", n, stage))
	}
}

// Faults combines injectors into one, for actors.Options.Faults.
type Faults []faults.Injector

// BeforeMessage implements faults.Injector.
func (f Faults) BeforeMessage(stage, kind string, n int64, msg any) {
	for _, i := range f {
		i.BeforeMessage(stage, kind, n, msg)
	}
}
