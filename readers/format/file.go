package format

import (
	"fmt"
	"os"
)

// OpenFile opens a file for reading and returns its size, which format
// readers check declared lengths against before allocating. Errors wrap the
// os error (which names the path) behind the format's name.
func OpenFile(formatName, path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w", formatName, err)
	}
	return f, st.Size(), nil
}
