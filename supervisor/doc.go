// Package supervisor owns the policies that decide what happens when a
// pipeline stage fails: error classes (Classify), what to do with a corrupt
// record (CorruptPolicy), retries of transient I/O errors with backoff on
// the caller's own timers (Backoff, Retry), and restart intensity (at most
// MaxRestarts restarts within Within; Tracker) with a protoactor
// SupervisorStrategy (Strategy) that restarts a failed stage or, past the
// intensity, stops them all, and restarts none once its supervising actor
// is stopping (Strategy.Halt).
//
// supervisor may import readers/format (for the corruption class), messages
// and protoactor-go's actor package. It must not import actors, sim or cmd.
package supervisor
