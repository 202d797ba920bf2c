package actors

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
)

// Sentinel errors of package actors.
var (
	// ErrProtocol is wrapped when a message breaks docs/protocol.md: demand
	// <= 0, a subscription from a place that cannot be served, an item the
	// receiver never asked for.
	ErrProtocol = protocol.ErrProtocol
	// ErrShutdown is returned by a pipeline that was shut down or closed.
	ErrShutdown = errors.New("actors: pipeline shut down")
	// ErrReadsInFlight is returned by Reset while a Next or HasNext call is
	// in flight, or while Run is.
	ErrReadsInFlight = errors.New("actors: reset refused while reads are in flight")
	// ErrAbandoned is wrapped by Close and Shutdown when user code (a
	// device's step, an xmap function) did not return within
	// Options.StopGrace of its cancellation. The pipeline is closed all the
	// same; the error names the code, whose goroutine may still run.
	ErrAbandoned = errors.New("actors: user code did not return after cancellation and was abandoned")
	// ErrPassDone is returned by Run when the current pass already ran to
	// its end: call Reset to start the next.
	ErrPassDone = errors.New("actors: the pass already ran to its end; call Reset to start the next")
	// ErrStage is wrapped by every *StageError.
	ErrStage = errors.New("actors: stage failed")
	// ErrBadSpec is wrapped when a pipeline spec is invalid.
	ErrBadSpec = protocol.ErrBadSpec
	// ErrReadStalled is wrapped when a file reader abandoned a read that
	// took longer than Options.ReadTimeout. It is transient: the reader
	// reopens the file at the record; it ends the pipeline only when the
	// retries run out.
	ErrReadStalled = errors.New("actors: read stalled")
)

// stalled is a read abandoned by the watchdog; supervisor.Classify sees it
// as transient.
type stalled struct {
	file   string
	record uint64
	after  time.Duration
}

func (e *stalled) Error() string {
	return fmt.Sprintf("%v: record %d of %s took more than %v", ErrReadStalled, e.record, e.file, e.after)
}
func (e *stalled) Unwrap() error   { return ErrReadStalled }
func (e *stalled) Transient() bool { return true }

// StageError is the error that ended a pipeline: which stage failed, the
// file and offset it was reading where known, its class and its cause. In
// process, Err is the original error, so errors.Is sees format.ErrCorrupt,
// supervisor.ErrRestartIntensity and the like.
type StageError struct {
	Stage  string
	File   string
	Offset int64 // byte offset of the chunk or record; -1 when unknown
	Record int64 // record index in the file; -1 when unknown
	Class  messages.ErrorClass
	Err    error
}

func (e *StageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "actors: stage %s", e.Stage)
	if e.File != "" {
		fmt.Fprintf(&b, " (file %s", e.File)
		if e.Offset >= 0 {
			fmt.Fprintf(&b, ", offset %d", e.Offset)
		}
		if e.Record >= 0 {
			fmt.Fprintf(&b, ", record %d", e.Record)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %s: %v", className(e.Class), e.Err)
	return b.String()
}

// Unwrap gives the cause and ErrStage.
func (e *StageError) Unwrap() []error { return []error{e.Err, ErrStage} }

func className(c messages.ErrorClass) string {
	switch c {
	case messages.ErrorClass_ERROR_CLASS_CORRUPT:
		return "corrupt data"
	case messages.ErrorClass_ERROR_CLASS_TRANSIENT:
		return "I/O error"
	case messages.ErrorClass_ERROR_CLASS_PANIC:
		return "panic"
	case messages.ErrorClass_ERROR_CLASS_FATAL:
		return "error"
	}
	return "failure"
}

// Classify is the class a Failure message gives err: a panic for restarts
// past the supervisor's intensity, else supervisor.Classify's.
func Classify(err error) messages.ErrorClass { return protocol.Classify(err) }
