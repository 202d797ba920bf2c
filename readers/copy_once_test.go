package readers_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/readers"
)

// holdLock takes the lock of copy name in dir as another process would:
// flock locks belong to an open file, so a second open of the lock file
// conflicts with copyOnce's as another process's would. Closing releases.
func holdLock(t *testing.T, dir, name string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	t.Cleanup(func() { f.Close() })
	return f
}

// writer writes content as a copy's write function, counting its calls.
func writer(content string, calls *int) func(io.Writer, int64) error {
	return func(w io.Writer, _ int64) error {
		*calls++
		_, err := io.WriteString(w, content)
		return err
	}
}

// requireCopyMade makes the copy "copy" in dir, which must be written
// once, now, with content.
func requireCopyMade(t *testing.T, dir, content string) {
	t.Helper()
	calls := 0
	path, err := readers.CopyOnce(dir, "copy", "", writer(content, &calls))
	require.NoError(t, err)
	require.Equal(t, 1, calls)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, content, string(b))
}

// Two processes sharing a cache (the ranks of one host) fetch or decode
// a copy once: the second waits for the first's copy rather than making
// its own beside it.
func TestACopyWaitsForTheProcessMakingIt(t *testing.T) {
	dir := t.TempDir()
	holder := holdLock(t, dir, "copy")
	waiting := make(chan struct{})
	readers.SetLockWaiting(t, func() { close(waiting) })
	calls := 0
	var path string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		path, err = readers.CopyOnce(dir, "copy", "", writer("mine", &calls))
	}()
	select {
	case <-waiting:
	case <-done:
		t.Fatal("the copy was made without waiting for the lock's holder")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "copy"), []byte("theirs"), 0o644))
	require.NoError(t, holder.Close())
	<-done
	require.NoError(t, err)
	require.Zero(t, calls, "the holder's copy was made again")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "theirs", string(b))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.Error(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB), "the copy another process made is held here too: no eviction removes it")
	readers.ReleaseHolds()
}

// A process killed mid-copy leaves its temporary file and its lock file
// behind; the next one to take the lock removes them, and no other copy's.
func TestACopyRemovesWhatAKilledHolderLeft(t *testing.T) {
	dir := t.TempDir()
	stale, lock, other := filepath.Join(dir, ".copy8167205471"), filepath.Join(dir, "copy.lock"), filepath.Join(dir, ".copy-b42")
	for _, p := range []string{stale, lock, other} {
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o644))
	}
	requireCopyMade(t, dir, "whole")
	require.NoFileExists(t, stale)
	require.NoFileExists(t, lock)
	require.FileExists(t, other)
}

// A holder that makes no progress (stopped, its disk hung) is not waited
// for past the patience: the copy is made beside it, and the holder's
// temporary, which it may still write, is left alone.
func TestACopyDoesNotWaitForAStoppedHolder(t *testing.T) {
	dir := t.TempDir()
	holdLock(t, dir, "copy")
	theirs := filepath.Join(dir, ".copy77")
	require.NoError(t, os.WriteFile(theirs, []byte("stuck"), 0o644))
	readers.SetLockPatience(t, 0)
	requireCopyMade(t, dir, "mine")
	require.FileExists(t, theirs)
}
