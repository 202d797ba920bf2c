package readers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Limits on the caches' sizes. A cache without one keeps every copy it
// makes; with one, making a copy removes the copies used least recently
// until the directory's copies fit, except those a process holds. A
// process holds every copy it uses, from its first use until it exits,
// with a shared flock(2) on the copy, and a copy is removed only under an
// exclusive one taken without waiting, so a copy a running job reads is
// never removed, whichever process evicts. The time of a copy's last use
// is its modification time, set at each use (a file's access time is not
// kept on most mounts). A cache whose copies are all held may stay above
// its limit until their jobs end; a copy larger than the limit is not
// made, and its file is read as it would be without the cache.

// DecodeCacheBytesEnv limits the decode cache (DecodeCacheEnv) to that
// many bytes: an integer with an optional K, M, G or T suffix (powers of
// 1024), as 20G. Unset, the cache has no limit.
const DecodeCacheBytesEnv = "ACTORFEED_DECODE_CACHE_BYTES"

// ObjectCacheBytesEnv limits the object cache (ObjectCacheEnv) as
// DecodeCacheBytesEnv limits the decode cache.
const ObjectCacheBytesEnv = "ACTORFEED_OBJECT_CACHE_BYTES"

// maxCacheBytes bounds a limit: 2^60 bytes, an exbibyte.
const maxCacheBytes = 1 << 60

// ParseBytes reads a size in bytes: an integer with an optional K, M, G or
// T suffix (powers of 1024), at least 1 and at most 2^60.
func ParseBytes(s string) (int64, error) {
	t, shift := strings.TrimSpace(s), 0
	if i := strings.IndexAny(t, "KMGT"); i >= 0 && i == len(t)-1 {
		shift = 10 * (1 + strings.IndexByte("KMGT", t[i]))
		t = t[:i]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 1 || n > maxCacheBytes>>shift {
		return 0, fmt.Errorf("%q: want a size in bytes from 1 to 2^60, as 20G, 512M or 1000000", s)
	}
	return n << shift, nil
}

// cacheLimit is the limit env sets, 0 for none.
func cacheLimit(env string) (int64, error) {
	s := os.Getenv(env)
	if env == "" || s == "" {
		return 0, nil
	}
	n, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%w", env, err)
	}
	return n, nil
}

// CheckCacheLimits says what is wrong with the caches' limits, if any is
// set wrong, so that a command refuses them before it reads anything.
func CheckCacheLimits() error {
	_, derr := cacheLimit(DecodeCacheBytesEnv)
	_, oerr := cacheLimit(ObjectCacheBytesEnv)
	return errors.Join(derr, oerr)
}

// Evictions count the files a process removed from a cache to keep it
// under its limit (copies, and the decode cache's kept indexes), and their
// bytes.
type Evictions struct {
	Files int
	Bytes int64
}

var evictions struct {
	sync.Mutex
	by map[string]Evictions // by the limit's variable
}

// CacheEvictions are the files this process removed from the decode
// cache and from the object cache to keep them under their limits.
func CacheEvictions() (decode, object Evictions) {
	evictions.Lock()
	defer evictions.Unlock()
	return evictions.by[DecodeCacheBytesEnv], evictions.by[ObjectCacheBytesEnv]
}

// holds are the copies this process holds, by path: open, with a shared
// lock, until it exits.
var holds sync.Map // path -> *os.File

// holdCopy holds the copy at dst and marks it used now. It is false when
// dst was removed before the lock was had (another process evicted it):
// the copy must then be made again.
func holdCopy(dst string) bool {
	if f, ok := holds.Load(dst); ok && sameFile(f.(*os.File), dst) {
		used(dst)
		return true
	}
	f, err := os.Open(dst)
	if err != nil {
		return false
	}
	// Waits while an evictor holds it exclusively: it removes the copy
	// before it lets go, which sameFile then sees.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil || !sameFile(f, dst) {
		f.Close()
		return err != nil && copied(dst) // no flock here: the copy is read unheld
	}
	hold(dst, f)
	return true
}

// hold keeps f, the copy dst open with a shared lock, for the process's
// life, in place of an older hold of dst.
func hold(dst string, f *os.File) {
	used(dst)
	if old, loaded := holds.Swap(dst, f); loaded {
		old.(*os.File).Close()
	}
}

// used marks the copy dst used now: the least recently used go first,
// and a failure only ages it.
func used(dst string) {
	now := time.Now()
	os.Chtimes(dst, now, now)
}

// evict removes the files in dir used least recently (copies, and kept
// indexes), but keep and the copies a process holds, until they total at
// most limit bytes, and counts them under env.
func evict(dir string, limit int64, keep, env string) {
	type copyFile struct {
		path string
		size int64
		used time.Time
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var all []copyFile
	var total int64
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".lock") {
			continue // temporaries and locks are not copies
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			all = append(all, copyFile{filepath.Join(dir, name), info.Size(), info.ModTime()})
			total += info.Size()
		}
	}
	slices.SortFunc(all, func(a, b copyFile) int { return a.used.Compare(b.used) })
	for _, c := range all {
		if total <= limit {
			return
		}
		if c.path != keep && removeUnheld(c.path) {
			total -= c.size
			evictions.Lock()
			if evictions.by == nil {
				evictions.by = map[string]Evictions{}
			}
			e := evictions.by[env]
			evictions.by[env] = Evictions{e.Files + 1, e.Bytes + c.size}
			evictions.Unlock()
		}
	}
}

// removeUnheld removes the copy at path if no process holds it, under an
// exclusive lock taken without waiting.
func removeUnheld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil || !sameFile(f, path) {
		return false
	}
	return os.Remove(path) == nil
}
