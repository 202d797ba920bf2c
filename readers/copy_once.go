package readers

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
)

// The decode cache and the object cache keep copies in a directory that
// every process of a host may share: the ranks of a trainer started by
// torch.distributed.run, a host's data service workers, the next job. A
// copy is made once in a process (a mutex by path) and, across processes,
// once while its lock is held: a process that finds the lock taken waits
// for the copy rather than fetching or decoding the same bytes beside the
// holder. The lock is flock(2)'s on name.lock, removed when released, so
// it dies with its holder; the temporaries (and lock file) a holder killed
// mid-copy left are removed by the next.

// copying serializes the making of one copy within the process: the
// readers that seek into a file at once wait for one decoding, those that
// open an object at once for one fetch.
var copying sync.Map // copy path -> *sync.Mutex

// lockPatience is how long a copy waits on another process's lock while
// that process's copy does not grow: a holder stopped (SIGSTOP, a hung
// disk) is not waited for past it; the copy is then made without the
// lock, as if the directory were not shared.
var lockPatience = 30 * time.Second

// lockWaiting, when set (tests), is called once when a copy starts
// waiting on another process's lock.
var lockWaiting func()

// copyOnce is the path of the copy named name in dir, written by write
// now if it is not there: whole or not at all (a temporary file renamed),
// once in the process however many readers ask for it at once, once on the
// host while the lock is honoured, and at most limit bytes, which write
// must hold to: MaxDecodedBytes, the cache's limit (the variable limitEnv
// names, cache_limit.go), and what leaves a tenth of the file system (and
// 1 GiB) free, however many copies there are. The copy is held by this
// process from then on; a new one makes room for itself under the
// cache's limit.
func copyOnce(dir, name, limitEnv string, write func(w io.Writer, limit int64) error) (string, error) {
	dst := filepath.Join(dir, name)
	mu, _ := copying.LoadOrStore(dst, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	capacity, err := cacheLimit(limitEnv)
	if err != nil {
		return dst, err
	}
	if copied(dst) && holdCopy(dst) {
		return dst, nil
	} // else absent, or evicted by another process between the two: made again
	if err := makeCopy(dir, name, capacity, write); err != nil {
		return dst, err
	}
	if capacity > 0 {
		evict(dir, capacity, dst, limitEnv)
	}
	return dst, nil
}

// makeCopy writes the copy name in dir, unless the process that held its
// lock made it, at most capacity bytes when capacity is not 0.
func makeCopy(dir, name string, capacity int64, write func(w io.Writer, limit int64) error) error {
	dst := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if unlock, held := lockCopy(dir, name); held {
		defer unlock()
		if copied(dst) && holdCopy(dst) { // made by the process that held the lock
			return nil
		}
		removeTemporaries(dir, name)
	}
	limit := int64(MaxDecodedBytes)
	if capacity > 0 {
		limit = min(limit, capacity)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err == nil {
		reserve := max(int64(fs.Blocks)*fs.Bsize/10, 1<<30)
		limit = min(limit, max(int64(fs.Bavail)*fs.Bsize-reserve, 0))
	}
	return writeHeld(dst, func(w io.Writer) error { return write(w, limit) })
}

// writeHeld writes the copy dst whole or not at all, as atomicfile.Write
// does, held by this process before it is renamed into place: an evictor
// in another process never finds it unheld between the two, which would
// cost the copy it just made. The made-copy of a process that held the
// lock is not rewritten (makeCopy).
func writeHeld(dst string, write func(io.Writer) error) error {
	f, err := atomicfile.Create(dst)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if err := write(f); err != nil {
		return err
	}
	// A duplicate descriptor shares the open file and its lock, which
	// outlive the pending file's close.
	held, herr := unix.Dup(int(f.Fd()))
	if herr == nil {
		if unix.Flock(held, unix.LOCK_SH) != nil {
			unix.Close(held)
			held = -1
		}
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		if held >= 0 {
			unix.Close(held)
		}
		return err
	}
	if held >= 0 {
		hold(dst, os.NewFile(uintptr(held), dst))
	}
	return nil
}

func copied(dst string) bool {
	st, err := os.Stat(dst)
	return err == nil && st.Mode().IsRegular()
}

// lockCopy takes the lock of the copy name in dir, waiting while another
// process holds it and its temporary grows. held is false when the lock
// could not be had (a file system without flock, the patience spent):
// the copy is then made beside whoever holds it, as before locks.
func lockCopy(dir, name string) (unlock func(), held bool) {
	path := filepath.Join(dir, name+".lock")
	last, since := int64(-1), time.Now()
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, false
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil && sameFile(f, path) {
			// Removed before it is released: the directory keeps no lock
			// files, and a waiter that then locks the removed one sees
			// that the path no longer names it, and tries again.
			return func() { os.Remove(path); f.Close() }, true
		}
		f.Close()
		if err == nil { // locked a lock file its holder removed since
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false
		}
		if last < 0 && lockWaiting != nil {
			lockWaiting()
		}
		if n := temporaryBytes(dir, name); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= lockPatience {
			return nil, false
		}
		time.Sleep(wait) // flock has no timeout: poll, as file lock libraries do
	}
}

// sameFile is whether path still names the file f has open.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// temporaries are the names atomicfile (renameio) gives the copy name's
// temporary files in its directory: "." + name + decimal digits.
func temporaries(dir, name string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "."+name)
		if ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// temporaryBytes is the size of the copy's temporaries: the holder's
// progress.
func temporaryBytes(dir, name string) int64 {
	var n int64
	for _, p := range temporaries(dir, name) {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// removeTemporaries removes what a holder of the lock killed mid-copy
// left: with the lock held, no process writes them.
func removeTemporaries(dir, name string) {
	for _, p := range temporaries(dir, name) {
		os.Remove(p)
	}
}
