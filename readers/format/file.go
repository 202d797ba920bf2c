package format

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotRegular is returned by OpenFile for a path that is not a regular
// file (a named pipe, a device such as /dev/zero, a directory or a socket).
// Such a file has no size to check lengths against, may never end, and a
// named pipe without a writer blocks its opener forever.
var ErrNotRegular = errors.New("format: not a regular file")

// Opener opens a file as os.OpenFile does, with flag and no permission
// bits: a data service worker's opens only inside its data roots
// (os.Root), so that no symbolic link leads it outside them.
type Opener func(path string, flag int) (*os.File, error)

// OpenFile opens a regular file (or a symbolic link to one) for reading and
// returns its size, which format readers check declared lengths against
// before allocating. Anything else is refused with ErrNotRegular before a
// call that could block: the file is opened non-blocking where the system
// has that (a named pipe then opens at once) and checked again through the
// open descriptor, so a file swapped in between is caught too. Errors wrap
// the os error (which names the path) behind the format's name.
func OpenFile(formatName, path string) (*os.File, int64, error) {
	return OpenFileWith(nil, formatName, path)
}

// OpenFileWith is OpenFile opening the file with open (os.OpenFile when
// nil). With an open of its own, the path is checked through the open
// descriptor only: it is open's to say what the path names.
func OpenFileWith(open Opener, formatName, path string) (*os.File, int64, error) {
	if open == nil {
		st, err := os.Stat(path)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", formatName, err)
		}
		if err := regular(path, st); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", formatName, err)
		}
		open = func(path string, flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) }
	}
	f, err := open(path, os.O_RDONLY|openNonBlocking)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(path, st)
	}
	if err == nil && st.Size() == 0 {
		err = sizeless(path, f)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	return f, st.Size(), nil
}

// sizeless refuses a file whose size reads 0 but which holds bytes: a
// kernel's pseudo-file (/proc, /sys) is "regular", and read by its size
// it was an empty data set.
func sizeless(path string, f *os.File) error {
	var one [1]byte
	if n, _ := f.ReadAt(one[:], 0); n == 0 {
		return nil
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (its size reads 0 but it holds bytes: a pseudo-file such as /proc's; copy it to a file first)", ErrNotRegular)}
}

// regular refuses every kind of file but a regular one, naming its kind.
func regular(path string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	kind := "special file"
	switch m := st.Mode(); {
	case m.IsDir():
		kind = "directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe"
	case m&fs.ModeCharDevice != 0:
		kind = "character device"
	case m&fs.ModeDevice != 0:
		kind = "block device"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind)}
}
