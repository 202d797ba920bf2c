// Package atomicfile writes files that appear complete or not at all: every
// file a command or a library call of actorfeed writes is written to a
// temporary file in the destination's directory, synced, and renamed over
// the destination only once complete (github.com/google/renameio does the
// work). A failure or a stop leaves the destination as it was.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// ErrOutputIsInput is returned by Refuse when an output would overwrite one
// of the inputs it is made from.
var ErrOutputIsInput = errors.New("atomicfile: the output is one of the inputs")

// ErrNotRegular is returned by Create when the destination exists and is
// not a regular file: renaming over /dev/null, a named pipe or a directory
// would replace it, so such a destination is refused.
var ErrNotRegular = errors.New("atomicfile: the destination is not a regular file")

// Create starts a file that replaces path when committed with
// CloseAtomicallyReplace; Cleanup (deferred) removes it otherwise. It is
// created in path's directory, so the rename never crosses file systems.
func Create(path string) (*renameio.PendingFile, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %v", ErrNotRegular, path, st.Mode().Type())
	}
	return renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithPermissions(0o644))
}

// Write writes path with what write writes, atomically.
func Write(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if err := write(f); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

// Refuse fails with ErrOutputIsInput when out names the same file as one of
// inputs (through another path or a link too). Inputs that do not exist are
// left for their reader to report.
func Refuse(out string, inputs ...string) error {
	o, err := os.Stat(out)
	if err != nil {
		return nil // a new file is no input
	}
	for _, in := range inputs {
		if i, err := os.Stat(in); err == nil && os.SameFile(o, i) {
			return fmt.Errorf("%w: %s is %s", ErrOutputIsInput, out, in)
		}
	}
	return nil
}

// Same says whether a and b name the same file: the same existing file
// (through another path or a link too), or the same path when either does
// not exist yet (two outputs to be written).
func Same(a, b string) bool {
	if x, err := os.Stat(a); err == nil {
		if y, err := os.Stat(b); err == nil {
			return os.SameFile(x, y)
		}
	}
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}
