package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
)

// ErrRestartIntensity is wrapped by the error of a pipeline stopped because
// its stages restarted more often than its Intensity allows.
var ErrRestartIntensity = errors.New("supervisor: restart intensity exceeded")

// Intensity bounds restarts: at most MaxRestarts within any window of
// length Within. A failure beyond that stops the pipeline.
type Intensity struct {
	MaxRestarts int
	Within      time.Duration
}

// DefaultIntensity allows 10 restarts within 10 s, as protoactor's default
// strategy does; a stage that keeps failing faster than that is broken, not
// unlucky. It is a function, so that no caller can change another's
// default.
func DefaultIntensity() Intensity { return Intensity{MaxRestarts: 10, Within: 10 * time.Second} }

// Tracker counts restarts against an Intensity. It is safe for concurrent
// use.
type Tracker struct {
	limit Intensity
	mu    sync.Mutex
	times []time.Time
	total int
}

// NewTracker returns a Tracker for limit.
func NewTracker(limit Intensity) *Tracker { return &Tracker{limit: limit} }

// Allow records a failure at now and reports whether a restart is within
// the intensity. A refused failure is not counted as a restart.
func (t *Tracker) Allow(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := t.times[:0]
	for _, at := range t.times {
		if now.Sub(at) < t.limit.Within {
			keep = append(keep, at)
		}
	}
	t.times = keep
	if len(t.times) >= t.limit.MaxRestarts {
		return false
	}
	t.times = append(t.times, now)
	t.total++
	return true
}

// Restarts is the number of restarts allowed so far.
func (t *Tracker) Restarts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Strategy is a protoactor SupervisorStrategy for the stages of one
// pipeline: a failed stage is restarted alone (its neighbours re-open their
// links to it by protocol) while the Tracker allows; past that, OnBreach is
// told and every stage is stopped. Once the stages are being stopped, by a
// breach or by Halt, it restarts none.
type Strategy struct {
	Tracker *Tracker
	// OnBreach runs in the supervising actor when a failure exceeds the
	// intensity, with the failed child and the panic value.
	OnBreach func(child *actor.PID, reason any)
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	halted atomic.Bool
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// Halt tells the strategy that the supervising actor is stopping its
// children: it restarts none from now on. Call it when the supervising
// actor receives *actor.Stopping, which comes before protoactor sends its
// children Stop.
//
// A failure can reach the supervisor after it told the failed child to
// stop. protoactor then queues the Restart behind the Stop, and the child,
// stopped and gone from the process registry, is started again by it: an
// actor nobody can stop, with whatever goroutines its Started starts.
func (s *Strategy) Halt() { s.halted.Store(true) }

// HandleFailure implements actor.SupervisorStrategy.
func (s *Strategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	if s.halted.Load() {
		// The child has its Stop queued; it stops from its suspended
		// mailbox (system messages still run).
		return
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if s.Tracker.Allow(now()) {
		sup.RestartChildren(child)
		return
	}
	s.Halt()
	if s.OnBreach != nil {
		s.OnBreach(child, reason)
	}
	sup.StopChildren(sup.Children()...)
}

// CorruptPolicy says what a stage does with a corrupt record.
type CorruptPolicy int

const (
	// FailOnCorrupt stops the pipeline with an error naming the record.
	FailOnCorrupt CorruptPolicy = iota
	// SkipCorrupt leaves the record out and counts it.
	SkipCorrupt
)

func (p CorruptPolicy) String() string {
	if p == SkipCorrupt {
		return "skip"
	}
	return "fail"
}

// ParseCorruptPolicy reads "fail" or "skip".
func ParseCorruptPolicy(s string) (CorruptPolicy, error) {
	switch s {
	case "fail":
		return FailOnCorrupt, nil
	case "skip":
		return SkipCorrupt, nil
	}
	return 0, fmt.Errorf("supervisor: corrupt policy %q: want fail or skip", s)
}

// transient is implemented by errors that say themselves whether a retry may
// help.
type transient interface{ Transient() bool }

// Classify sorts an error into the class its policy is chosen by: corrupt
// data (format.ErrCorrupt), transient I/O (an error saying Transient() or
// Timeout(), or EIO, EAGAIN, EINTR, ETIMEDOUT, ECONNRESET), or fatal
// (anything else: a missing file, a bad argument, a protocol error).
func Classify(err error) messages.ErrorClass {
	var t transient
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return messages.ErrorClass_ERROR_CLASS_UNKNOWN
	case errors.Is(err, format.ErrCorrupt):
		return messages.ErrorClass_ERROR_CLASS_CORRUPT
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return messages.ErrorClass_ERROR_CLASS_FATAL
	case errors.As(err, &t) && t.Transient(),
		errors.As(err, &timeout) && timeout.Timeout(),
		errors.Is(err, syscall.EIO), errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.ECONNRESET):
		return messages.ErrorClass_ERROR_CLASS_TRANSIENT
	}
	return messages.ErrorClass_ERROR_CLASS_FATAL
}

// Backoff is the retry schedule for transient errors: Attempts tries in all,
// the k-th retry after Initial*2^k (at most Max), each delay scaled by a
// seeded jitter in [0.5, 1.5) when Jitter is set.
type Backoff struct {
	Initial, Max time.Duration
	Attempts     int
	Jitter       bool
	Seed         uint64
}

// DefaultBackoff tries 5 times, waiting 10 ms, 20 ms, 40 ms, 80 ms. It is a
// function, so that no caller can change another's default.
func DefaultBackoff() Backoff {
	return Backoff{Initial: 10 * time.Millisecond, Max: time.Second, Attempts: 5}
}

// Delay is the wait before retry k (from 0).
func (b Backoff) Delay(k int, rng *rand.Rand) time.Duration {
	d := b.Initial
	for i := 0; i < k && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter && rng != nil {
		d = time.Duration(float64(d) * (0.5 + rng.Float64()))
	}
	return d
}

// ErrRetriesExhausted is wrapped, with the last error, when a transient
// error persists through every attempt.
var ErrRetriesExhausted = errors.New("supervisor: retries exhausted")

// Retry runs fn until it succeeds, fails with an error that is not
// transient, or has been tried b.Attempts times, waiting b's delays in
// between on its own timer. It returns early with ctx's error when ctx ends.
func Retry(ctx context.Context, b Backoff, fn func(attempt int) error) error {
	rng := rand.New(rand.NewPCG(b.Seed, 0))
	attempts := max(b.Attempts, 1)
	for k := 0; ; k++ {
		err := fn(k)
		if err == nil || Classify(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
			return err
		}
		if k+1 >= attempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempts, err)
		}
		t := time.NewTimer(b.Delay(k, rng))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
