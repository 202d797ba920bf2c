package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/format"
)

// maxStateBytes bounds a state file: a state is a few hundred bytes, its
// layout a range per rank that was re-dealt.
const maxStateBytes = 1 << 20

// readState reads the pipeline state saved in path by --checkpoint.
func readState(path string) (*actors.State, error) {
	f, _, err := format.OpenFile("state", path) // a regular file: a named pipe would block
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	if len(data) > maxStateBytes {
		return nil, fmt.Errorf("--resume %s: more than %d bytes: not a state", path, maxStateBytes)
	}
	var st actors.State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("--resume %s: not a state: %w", path, err)
	}
	if st.Version == 0 {
		return nil, fmt.Errorf("--resume %s: not a state: it has no version", path)
	}
	return &st, nil
}

// checkpointer writes the pipeline's state to a file, atomically: every
// `every` committed batches (asked by the devices' steps, written by a
// goroutine of its own, so that no step waits for the disk), and once at
// the end, however the run ended. A process killed between two writes
// leaves the last one whole.
type checkpointer struct {
	path  string
	every int
	p     func() *actors.Pipeline

	mu      sync.Mutex
	stepped int
	due     chan struct{}
	done    chan struct{}
	err     error // the first failed write
	closed  bool
}

func newCheckpointer(path string, every int, p func() *actors.Pipeline) *checkpointer {
	c := &checkpointer{path: path, every: every, p: p, due: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// step is called after each step: every `every` steps a write is due.
// The step's own batch is not committed yet; the write after it may or may
// not include it, and either is a sound checkpoint.
func (c *checkpointer) step() {
	if c == nil || c.every <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepped++
	if c.stepped%c.every == 0 && !c.closed { // a step abandoned by the stop may come after final
		select {
		case c.due <- struct{}{}:
		default: // a write is pending: it will see this step's commits too
		}
	}
}

func (c *checkpointer) loop() {
	for range c.due {
		c.write()
	}
	close(c.done)
}

// write saves the state now.
func (c *checkpointer) write() {
	st, err := c.p().State()
	if err == nil {
		err = atomicfile.Write(c.path, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("--checkpoint: %w", err)
	}
}

// final stops the periodic writes and writes the state once more: call it
// after the pipeline is closed, when no step commits any more.
func (c *checkpointer) final() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	close(c.due)
	c.mu.Unlock()
	<-c.done
	c.write()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
