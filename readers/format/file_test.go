package format_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
)

// A named pipe with no writer blocked os.Open forever, and /dev/zero read as
// an empty file: anything but a regular file is refused before it is opened
// for reading, naming the path and its kind.
func TestOpenFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.recordio")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "link.recordio")
	require.NoError(t, os.Symlink(fifo, link))
	for path, kind := range map[string]string{fifo: "named pipe", link: "named pipe", "/dev/zero": "character device", dir: "directory"} {
		done := make(chan error, 1)
		go func() {
			f, _, err := format.OpenFile("recordio", path)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, format.ErrNotRegular, path)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, kind)
		case <-time.After(30 * time.Second): // a guard against the hang, not a timing assertion
			t.Fatalf("OpenFile(%s) blocked", path)
		}
	}
}

func TestOpenFileReadsARegularFileThroughALink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data")
	require.NoError(t, os.WriteFile(path, []byte("12345"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(path, link))
	f, size, err := format.OpenFile("recordio", link)
	require.NoError(t, err)
	defer f.Close()
	require.EqualValues(t, 5, size)
	_, _, err = format.OpenFile("recordio", filepath.Join(dir, "missing"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}
