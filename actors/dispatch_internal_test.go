package actors

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoolReusesIdleGoroutines(t *testing.T) {
	p := newPool()
	defer p.close()
	done := make(chan int)
	for i := range 100 {
		p.Schedule(func() { done <- i })
		require.Equal(t, i, <-done)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Each function ran to its end before the next was scheduled: once a
	// goroutine is parked idle, it takes the next one, so a few goroutines
	// did it all.
	require.Less(t, p.started, 50)
}

func TestPoolRunsEverythingAndCloseWaits(t *testing.T) {
	p := newPool()
	release := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(10)
	for range 10 {
		p.Schedule(func() { <-release; ran.Done() })
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	close(release)
	ran.Wait()
	<-closed
	// After close, work still runs, on a goroutine of its own.
	after := make(chan struct{})
	p.Schedule(func() { close(after) })
	<-after
}
