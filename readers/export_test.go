package readers

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
