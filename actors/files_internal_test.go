package actors

import (
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

// A subscriber that asks for more groups than the buffer holds gets the
// buffer, and the readers are asked for the rest at once: nothing else may
// prompt open_files later, since the subscriber waits for groups it already
// asked for. (open_files once granted credit before flushing, saw a full
// buffer, and a pipeline with Window 8 hung about once in a hundred passes.)
func TestFilesGrantsReadersWhatItsFlushFreed(t *testing.T) {
	sub, reader := actor.NewPID("local", "sub"), actor.NewPID("local", "reader-0")
	c := &filesMachine{workers: []*actor.PID{reader}, buffer: 3, window: 8, work: []workerState{{unit: 0, epoch: 7}}}
	c.out.reset(0)
	for range c.buffer {
		c.out.push(&messages.Batch{})
	}
	require.NoError(t, c.out.subscribe(sub, &messages.Subscribe{Epoch: 1}))
	require.NoError(t, c.out.onDemand(&messages.Demand{Epoch: 1, N: 5}))

	var box outbox
	c.settle(&box)
	var toSub, toReader []any
	for _, e := range box.msgs {
		if e.to.Equal(reader) {
			toReader = append(toReader, e.msg)
		} else {
			toSub = append(toSub, e.msg)
		}
	}
	require.Len(t, toSub, 3, "the buffer goes to the subscriber")
	require.Len(t, toReader, 1, "the reader is asked for what that freed")
	d := toReader[0].(*messages.Demand)
	require.EqualValues(t, 7, d.Epoch)
	require.EqualValues(t, 3, d.N, "a buffer's worth")
	require.Equal(t, 3, c.work[0].outstanding)
}

// Readers of objects wait on the network, not on a core: by default there
// are at least ObjectThreads of them, so that requests overlap; a count
// the user gives, and the pieces of work there are, still bound them.
func TestObjectsGetReadersForTheirRoundTrips(t *testing.T) {
	local := Files{Paths: []string{"recordio:/data/a.recordio"}}
	objects := Files{Paths: []string{"/data/a.recordio", "recordio:s3://bkt/b.recordio"}}
	threads, _ := local.readers(1000)
	require.Equal(t, runtime.NumCPU(), threads)
	threads, _ = objects.readers(1000)
	require.Equal(t, max(runtime.NumCPU(), ObjectThreads), threads)
	threads, _ = objects.readers(3)
	require.Equal(t, min(3, max(runtime.NumCPU(), ObjectThreads)), threads)
	objects.Threads = 2
	threads, _ = objects.readers(1000)
	require.Equal(t, 2, threads)
}
