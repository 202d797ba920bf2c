package program

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

var (
	// ErrBadProgram is wrapped by every *OpError: an unknown op, a missing
	// or ill-typed attribute, an input that names no variable.
	ErrBadProgram = errors.New("program: bad program")
	// ErrEOF is returned by the read op at the end of the data ("There is
	// no next data."); has_next says false instead. It wraps io.EOF, the
	// end of data of the readers and of Pipeline.Next.
	ErrEOF = fmt.Errorf("program: there is no next data: %w", io.EOF)
)

// Op is one operation of a program, as Fluid's OpDesc: its type, the
// variables it reads and writes, and its attributes.
type Op struct {
	Type string
	// In names the input variable (the underlying reader of a decorator,
	// the reader of read, has_next and reset).
	In string
	// Out names the output variables: the reader an op creates, the slots
	// read splits a batch into, the flag has_next sets.
	Out   []string
	Attrs map[string]any
}

// Program is a list of ops run in order.
type Program struct{ Ops []Op }

// OpError is what a bad op gets: the op (its position and type), the field
// and what was expected.
type OpError struct {
	Index int    // position in its program
	Op    string // op type
	Field string // attribute or "in"/"out"; empty for the op as a whole
	Want  string // what was expected
	Got   any    // what was there, when it helps
	Err   error  // an underlying cause, if any
}

func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program: op %d (%s)", e.Index, e.Op)
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	if e.Want != "" {
		fmt.Fprintf(&b, ": want %s", e.Want)
	}
	if e.Got != nil {
		fmt.Fprintf(&b, ", got %v", e.Got)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *OpError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadProgram, e.Err}
	}
	return []error{ErrBadProgram}
}

// Reader is a reader variable (PaddlePaddle Fluid's ReaderHolder): the chain of
// stages that creates it, and its pipeline once started.
type Reader struct {
	name   string
	stages []actors.Stage

	mu       sync.Mutex
	pipeline *actors.Pipeline
}

// Stages is the reader's chain, source first.
func (r *Reader) Stages() []actors.Stage { return r.stages }

// Pipeline is the reader's running pipeline, nil before its first use.
func (r *Reader) Pipeline() *actors.Pipeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pipeline
}

// Scope holds a program's variables by name: readers, feed-queue holders,
// and what read and has_next write. It is safe for concurrent use. Close
// shuts down every pipeline its readers started.
type Scope struct {
	// Options are used to start pipelines (actor system, corrupt-record
	// policy, fault injection, ...).
	Options actors.Options
	// Maps are the functions create_map_reader names; a Service's workers
	// run them by the same names (service.WorkerOptions.Maps).
	Maps map[string]actors.MapFunc
	// SampleMaps makes the function of a name Maps lacks, one that sees
	// its samples (actors.Map.Samples), as "decode(size=224)"; the
	// workers make it the same way (service.WorkerOptions.SampleMaps).
	SampleMaps func(name string) (actors.SampleMapFunc, error)
	// anyMap lets create_map_reader name maps the scope does not have:
	// a spec is checked on a scope that starts nothing, before the maps
	// are bound.
	anyMap bool

	mu      sync.Mutex
	readers map[string]*Reader
	queues  map[string]*readers.FeedQueueHolder
	values  map[string]any
	started map[*readers.FeedQueue]string // queue -> reader whose pipeline reads it
}

// NewScope returns an empty scope whose pipelines start with opts.
func NewScope(opts actors.Options) *Scope {
	return &Scope{Options: opts, readers: map[string]*Reader{}, queues: map[string]*readers.FeedQueueHolder{},
		values: map[string]any{}, started: map[*readers.FeedQueue]string{}}
}

// InitFeedQueue creates the feed-queue holder variable name, as the Python
// side does before the startup program runs, and initialises its queue
// (capacity, declared slots). Initialising the same holder twice is an error
// (readers.ErrAlreadyInitialized).
func (s *Scope) InitFeedQueue(name string, capacity int, slots []readers.SlotSpec) (*readers.FeedQueue, error) {
	s.mu.Lock()
	h, ok := s.queues[name]
	if !ok {
		h = &readers.FeedQueueHolder{}
		s.queues[name] = h
	}
	s.mu.Unlock()
	q, err := h.InitOnce(capacity, slots)
	if err != nil {
		return nil, fmt.Errorf("program: feed queue %q: %w", name, err)
	}
	return q, nil
}

// Reader returns the reader variable name, or nil.
func (s *Scope) Reader(name string) *Reader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readers[name]
}

// Readers lists the names of the reader variables, sorted.
func (s *Scope) Readers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.readers))
	for n := range s.readers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tensor returns the tensor a read op wrote to name.
func (s *Scope) Tensor(name string) (tensor.LoDTensor, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.values[name].(tensor.LoDTensor)
	return t, ok
}

// Bool returns the flag a has_next op wrote to name.
func (s *Scope) Bool(name string) (v, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok = s.values[name].(bool)
	return v, ok
}

// Value returns whatever variable name holds: a tensor, a flag or the
// actors.Item of the last read (under the reader's name + "@item").
func (s *Scope) Value(name string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[name]
}

func (s *Scope) set(name string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[name] = v
}

// pull returns the reader's pipeline, starting it to be read with Next;
// ctx bounds building it.
func (s *Scope) pull(ctx context.Context, r *Reader) (*actors.Pipeline, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pipeline != nil {
		return r.pipeline, nil
	}
	if err := s.claim(r); err != nil {
		return nil, err
	}
	p, err := actors.NewContext(ctx, r.stages, s.Options)
	if err != nil {
		return nil, fmt.Errorf("program: starting reader %q: %w", r.name, err)
	}
	r.pipeline = p
	return p, nil
}

// RunDevices starts the reader name's pipeline feeding dev instead of being
// read by read ops; ctx bounds building it (actors.NewDevicesContext). The
// caller runs passes with Run and Reset; Close shuts it down with the scope.
func (s *Scope) RunDevices(ctx context.Context, name string, dev actors.Devices) (*actors.Pipeline, error) {
	r := s.Reader(name)
	if r == nil {
		return nil, fmt.Errorf("%w: no reader %q", ErrBadProgram, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pipeline != nil {
		return nil, fmt.Errorf("%w: reader %q is already started", ErrBadProgram, name)
	}
	if err := s.claim(r); err != nil {
		return nil, err
	}
	p, err := actors.NewDevicesContext(ctx, r.stages, dev, s.Options)
	if err != nil {
		return nil, fmt.Errorf("program: starting reader %q on %d devices: %w", name, dev.N, err)
	}
	r.pipeline = p
	return p, nil
}

// claim records that r's pipeline reads its feed queue: a queue can feed
// one pipeline only.
func (s *Scope) claim(r *Reader) error {
	q, ok := r.stages[0].(actors.Queue)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, taken := s.started[q.Queue]; taken {
		return fmt.Errorf("%w: reader %q reads the feed queue reader %q already reads", ErrBadProgram, r.name, other)
	}
	s.started[q.Queue] = r.name
	return nil
}

// Close shuts down every pipeline the scope's readers started.
func (s *Scope) Close() error {
	s.mu.Lock()
	rs := make([]*Reader, 0, len(s.readers))
	for _, r := range s.readers {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	var errs []error
	for _, r := range rs {
		if p := r.Pipeline(); p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// Run runs the ops of prog in order, once. It stops at the first error;
// read at the end of the data returns an error wrapping ErrEOF.
func (s *Scope) Run(ctx context.Context, prog *Program) error {
	for i, op := range prog.Ops {
		if err := s.runOp(ctx, i, op); err != nil {
			return err
		}
	}
	return nil
}

// Loop runs main the way PaddlePaddle Fluid's main programs do: while the reader that
// main reads has a next batch, run main's ops; at the end of a pass, reset
// the reader and go on until passes passes were read (with a multi-pass
// reader, passes is 1). each, when set, runs after every iteration with the
// pass it belongs to.
func (s *Scope) Loop(ctx context.Context, main *Program, passes int, each func(pass int) error) error {
	reader := ""
	for _, op := range main.Ops {
		if op.Type == "read" {
			if reader != "" && op.In != reader {
				return fmt.Errorf("%w: a main program to loop reads one reader, this one reads %q and %q", ErrBadProgram, reader, op.In)
			}
			reader = op.In
		}
	}
	if reader == "" {
		return fmt.Errorf("%w: the main program has no read op", ErrBadProgram)
	}
	r := s.Reader(reader)
	if r == nil {
		return fmt.Errorf("%w: the main program reads %q, which is no reader", ErrBadProgram, reader)
	}
	p, err := s.pull(ctx, r)
	if err != nil {
		return err
	}
	for pass := 0; pass < passes; {
		more, err := p.HasNext(ctx)
		if err != nil {
			return err
		}
		if !more {
			if pass++; pass < passes {
				if err := p.Reset(); err != nil {
					return err
				}
			}
			continue
		}
		if err := s.Run(ctx, main); err != nil {
			return err
		}
		if each != nil {
			if err := each(pass); err != nil {
				return err
			}
		}
	}
	return nil
}
