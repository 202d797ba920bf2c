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

// OpenFile opens a regular file (or a symbolic link to one) for reading and
// returns its size, which format readers check declared lengths against
// before allocating. Anything else is refused with ErrNotRegular before a
// call that could block: the file is opened non-blocking where the system
// has that (a named pipe then opens at once) and checked again through the
// open descriptor, so a file swapped in between is caught too. Errors wrap
// the os error (which names the path) behind the format's name.
func OpenFile(formatName, path string) (*os.File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	if err := regular(path, st); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlocking, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	if st, err = f.Stat(); err == nil {
		err = regular(path, st)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	return f, st.Size(), nil
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
