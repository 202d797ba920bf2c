package sim

// Verdict is a run's outcome.
type Verdict string

const (
	Pass Verdict = "pass"
	Fail Verdict = "FAIL"
	// Stopped is the verdict of a scenario whose caller's ctx ended before
	// it did (an interrupt): it says nothing about the invariants.
	Stopped Verdict = "stopped"
)
