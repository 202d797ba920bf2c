package actors

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

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
