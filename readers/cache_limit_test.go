package readers_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
)

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "1000000": 1000000, "20G": 20 << 30, "512M": 512 << 20, " 3K ": 3 << 10, "1T": 1 << 40} {
		got, err := readers.ParseBytes(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "0", "-5", "1.5G", "20GB", "K", "2000000P", "1048577T", "10 G"} {
		_, err := readers.ParseBytes(s)
		require.ErrorContains(t, err, "want a size in bytes", s)
	}
}

// limitEnv is the variable the tests' caches take their limit from.
const limitEnv = "ACTORFEED_TEST_CACHE_BYTES"

// makeCopy makes the copy name of n bytes in dir, held by this process.
func makeCopy(t *testing.T, dir, name string, n int) {
	t.Helper()
	calls := 0
	_, err := readers.CopyOnce(dir, name, limitEnv, writer(string(make([]byte, n)), &calls))
	require.NoError(t, err)
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// aged sets a copy's last use an hour before now, less minutes.
func aged(t *testing.T, dir, name string, minutes int) {
	at := time.Now().Add(-time.Hour + time.Duration(minutes)*time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(dir, name), at, at))
}

// A new copy makes room under the limit by removing the copies used
// least recently that no process holds: a copy used again is kept.
func TestACacheEvictsTheLeastRecentlyUsedCopy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(limitEnv, "250")
	t.Cleanup(readers.ReleaseHolds)
	before := readers.EvictionsOf(limitEnv)
	makeCopy(t, dir, "a", 100)
	makeCopy(t, dir, "b", 100)
	aged(t, dir, "a", 0)
	aged(t, dir, "b", 1)
	readers.ReleaseHolds()     // as if their job ended
	makeCopy(t, dir, "a", 100) // used again: its copy, held, newest
	makeCopy(t, dir, "c", 100)
	require.True(t, exists(dir, "a") && exists(dir, "c"))
	require.False(t, exists(dir, "b"), "the least recently used, unheld")
	require.Equal(t, readers.Evictions{Files: before.Files + 1, Bytes: before.Bytes + 100}, readers.EvictionsOf(limitEnv))
}

// A copy a running job holds is never removed, even when that leaves the
// cache above its limit; once its job lets go, the next copy removes it.
func TestAHeldCopyIsNotEvicted(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(limitEnv, "150")
	t.Cleanup(readers.ReleaseHolds)
	makeCopy(t, dir, "a", 100)
	aged(t, dir, "a", 0)
	makeCopy(t, dir, "b", 100)
	require.True(t, exists(dir, "a") && exists(dir, "b"), "a is held")
	readers.ReleaseHolds()
	makeCopy(t, dir, "c", 10)
	require.False(t, exists(dir, "a"))
	require.True(t, exists(dir, "b") && exists(dir, "c"))
}

// A copy larger than the cache's limit is not made: the file is read as
// without the cache. A limit set wrong is an error naming its variable.
func TestACopyLargerThanTheLimitIsNotMade(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(limitEnv, "10")
	_, err := readers.CopyOnce(dir, "big", limitEnv, func(w io.Writer, limit int64) error {
		require.EqualValues(t, 10, limit)
		return errors.New("over the limit")
	})
	require.ErrorContains(t, err, "over the limit")
	require.False(t, exists(dir, "big"))
	t.Setenv(readers.DecodeCacheBytesEnv, "lots")
	require.ErrorContains(t, readers.CheckCacheLimits(), readers.DecodeCacheBytesEnv+`="lots": want a size`)
}

// Copies made at once in a cache too small for them each come back held,
// and each is written once: none is evicted by another's making between
// being written and being held, which cost a decode copy its one read of
// a gzip stream (one run of a job in eight failed so).
func TestCopiesMadeAtOnceAreHeldAsTheyAppear(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(limitEnv, "150")
	t.Cleanup(readers.ReleaseHolds)
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() {
			written := false
			path, err := readers.CopyOnce(dir, fmt.Sprintf("copy-%d.bin", i), limitEnv, func(w io.Writer, _ int64) error {
				if written {
					return errors.New("written twice: the stream it copies is gone")
				}
				written = true
				_, err := w.Write(make([]byte, 100))
				return err
			})
			if err == nil && !exists(dir, filepath.Base(path)) {
				err = fmt.Errorf("%s was evicted while held", path)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}
