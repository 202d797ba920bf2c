package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/format"
)

// maxStateBytes bounds a state file: a state is a few hundred bytes, its
// layout a range per rank that was re-dealt. maxStatesBytes bounds them
// all: a job's states hold the same layout, once per rank.
const (
	maxStateBytes  = 1 << 20
	maxStatesBytes = 256 << 20
)

// resumed is what --resume gave: the states of the stopped job and the
// files they came from.
type resumed struct {
	states []actors.State
	files  []string
}

// readStates reads the states --resume names: files or globs, a file
// named twice read once, at most one per rank of the largest world and
// budget bytes in all (maxStatesBytes).
func readStates(entries []string, budget int64) (resumed, error) {
	var r resumed
	seen, total := map[string]bool{}, int64(0)
	for _, e := range entries {
		matches, err := globEntry("--resume", e)
		if err != nil {
			return resumed{}, err
		}
		for _, m := range matches {
			if key := fileKey(m); seen[key] {
				continue
			} else {
				seen[key] = true
			}
			if len(r.files) == actors.MaxWorld {
				return resumed{}, usageError{fmt.Errorf("--resume: more than %d states: more than a job has ranks", actors.MaxWorld)}
			}
			st, n, err := readState(m)
			if err != nil {
				return resumed{}, err
			}
			if total += n; total > budget {
				return resumed{}, usageError{fmt.Errorf("--resume: the states hold more than %d bytes: more than a job's states", budget)}
			}
			r.states, r.files = append(r.states, *st), append(r.files, m)
		}
	}
	return r, nil
}

// globEntry is the files a flag's entry names: itself, or a glob's
// matches (none is an error).
func globEntry(flag, e string) ([]string, error) {
	if !strings.ContainsAny(e, "*?[") {
		return []string{e}, nil
	}
	m, err := filepath.Glob(e)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s %q: %w", flag, e, err)}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%s %q matches no file", flag, e)
	}
	return m, nil
}

// fileKey names a file whatever the path that leads to it (relative,
// through links), so that a file named twice is read once: its device and
// inode, or, where it cannot be stated, its absolute path.
func fileKey(path string) string {
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
		}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path
}

// readState reads the pipeline state saved in path by --checkpoint, and
// its size.
func readState(path string) (*actors.State, int64, error) {
	f, _, err := format.OpenFile("state", path) // a regular file: a named pipe would block
	if err != nil {
		return nil, 0, fmt.Errorf("--resume: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("--resume: %w", err)
	}
	if len(data) > maxStateBytes {
		return nil, 0, fmt.Errorf("--resume %s: more than %d bytes: not a state", path, maxStateBytes)
	}
	// Every field is checked here, before anything reads one (how many
	// passes are left, say): a state out of range is a bad argument.
	st, err := actors.DecodeState(data)
	if err != nil {
		return nil, 0, usageError{fmt.Errorf("--resume %s: %w", path, err)}
	}
	return &st, int64(len(data)), nil
}

// refused names the state file a refusal of the pipeline's is about: a
// bad command line (exit 2), as the states are the command's arguments.
func (r resumed) refused(err error) error {
	var se *actors.StateError
	if !errors.As(err, &se) {
		return err
	}
	if se.Index >= 0 && se.Index < len(r.files) {
		return usageError{fmt.Errorf("--resume %s: %w", r.files[se.Index], se.Err)}
	}
	return usageError{fmt.Errorf("--resume %s: %w", strings.Join(r.files, ","), se.Err)}
}

// firstEpoch is the epoch the resumed run starts in: the earliest state's
// (a rank that finished its share of an epoch stands at the next's start).
func (r resumed) firstEpoch() int {
	if len(r.states) == 0 {
		return 0
	}
	return slices.MinFunc(r.states, func(a, b actors.State) int { return cmp.Compare(a.Epoch, b.Epoch) }).Epoch
}

// early is the state of a run stopped before its pipeline was built: the
// state it resumed from, re-dealt for its rank as the pipeline would have
// (nothing of it consumed), or, starting afresh, the job's start. It is
// false when the states cannot be resumed: the run says why.
func (r resumed) early(shard actors.Shard) (actors.State, bool) {
	if len(r.states) == 0 {
		return actors.FreshState(shard), true
	}
	st, err := actors.Rejoin(r.states, shard)
	return st, err == nil
}

// writeState writes st to path, atomically, as --checkpoint does.
func writeState(path string, st actors.State) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	})
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
		err = writeState(c.path, st)
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
