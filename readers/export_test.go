package readers

import "time"

// QueueWaiters reports how many goroutines are blocked in q's Push or Pop, so
// tests can act once a call is known to be blocked rather than racing it.
func QueueWaiters(q *FeedQueue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// ForgetIndexes forgets the raw files' indexes read in this process, as a
// new process starts without them.
func ForgetIndexes() { streamIndexes.Clear() }

// CopyOnce is copyOnce: the decode and object caches' copies.
var CopyOnce = copyOnce

// SetLockPatience sets how long a copy waits on a holder that makes no
// progress, until the test ends.
func SetLockPatience(t interface{ Cleanup(func()) }, d time.Duration) {
	was := lockPatience
	lockPatience = d
	t.Cleanup(func() { lockPatience = was })
}

// SetLockWaiting has f called when a copy starts waiting on another
// process's lock, until the test ends.
func SetLockWaiting(t interface{ Cleanup(func()) }, f func()) {
	lockWaiting = f
	t.Cleanup(func() { lockWaiting = nil })
}

// ReleaseHolds lets go of every copy this process holds, as its exit
// would.
func ReleaseHolds() {
	holds.Range(func(k, f any) bool {
		holds.Delete(k)
		f.(interface{ Close() error }).Close()
		return true
	})
}

// EvictionsOf are the evictions counted under the limit's variable env.
func EvictionsOf(env string) Evictions {
	evictions.Lock()
	defer evictions.Unlock()
	return evictions.by[env]
}
