package serveproc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/serveproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sh runs script as a worker process would run.
func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

const serve = `echo starting; echo "serving on 127.0.0.1:7070, roots /data"; while :; do sleep 0.05; done`

// A worker is started once it says where it serves, and its exit status
// on SIGINT is its verdict, with the end of its stderr.
func TestStartReadsTheAddressAndStopHearsTheVerdict(t *testing.T) {
	p, err := serveproc.Start(t.Context(), sh(`trap 'exit 0' INT; `+serve), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7070", p.Addr)
	require.NoError(t, p.Stop(10*time.Second))

	p, err = serveproc.Start(t.Context(), sh(`trap 'echo goroutines left >&2; exit 3' INT; `+serve), 10*time.Second)
	require.NoError(t, err)
	err = p.Stop(10 * time.Second)
	require.ErrorContains(t, err, "exit status 3")
	require.ErrorContains(t, err, "goroutines left")

	p, err = serveproc.Start(t.Context(), sh(`trap 'exit 3' INT; `+serve), 10*time.Second)
	require.NoError(t, err)
	p.Kill()
	require.NoError(t, p.Stop(10*time.Second), "a killed worker's status is not its own")
}

// A worker that never serves, or never stops, is an error once its bound
// is past, never a wait without end; one that ends before serving says
// why in its own words.
func TestBoundsOfAWorkersLife(t *testing.T) {
	_, err := serveproc.Start(t.Context(), sh(`echo no data root >&2; exit 1`), 10*time.Second)
	require.ErrorContains(t, err, "ended before serving")
	require.ErrorContains(t, err, "no data root")

	_, err = serveproc.Start(t.Context(), sh(`echo still indexing >&2; while :; do sleep 0.05; done`), 100*time.Millisecond)
	require.ErrorContains(t, err, "did not serve within 100ms")
	require.ErrorContains(t, err, "still indexing")

	p, err := serveproc.Start(t.Context(), sh(`trap '' INT; `+serve), 10*time.Second)
	require.NoError(t, err)
	require.ErrorContains(t, p.Stop(100*time.Millisecond), "did not stop within 100ms of SIGINT")
}
