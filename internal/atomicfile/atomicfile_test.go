package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
)

func TestWriteReplacesOnlyWhenComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	boom := errors.New("boom")
	err := atomicfile.Write(path, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(got), "a failed write leaves the old file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "and no temporary file")

	require.NoError(t, atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new", string(got))
}

func TestRefuseFindsTheInputThroughALink(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	require.NoError(t, os.WriteFile(in, []byte("x"), 0o644))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(in, link))
	require.ErrorIs(t, atomicfile.Refuse(link, filepath.Join(dir, "other"), in), atomicfile.ErrOutputIsInput)
	require.NoError(t, atomicfile.Refuse(filepath.Join(dir, "new"), in))
}

// Renaming over /dev/null as root would replace the device with a regular
// file (--emit-ids /dev/null).
// A destination that is not a regular file is refused.
func TestCreateRefusesToReplaceWhatIsNotARegularFile(t *testing.T) {
	for _, path := range []string{os.DevNull, t.TempDir()} {
		_, err := atomicfile.Create(path)
		require.ErrorIs(t, err, atomicfile.ErrNotRegular, path)
	}
	st, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeCharDevice, "/dev/null is still a device")
}
