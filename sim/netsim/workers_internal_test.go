package netsim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeWorker is a worker command: a shell script run with the flags
// startProcessWorker appends as its arguments, which it ignores.
func fakeWorker(script string) []string { return []string{"/bin/sh", "-c", script, "fake-worker"} }

// A worker process is started once it says it serves, and stopped with
// SIGINT: its exit status is its verdict, unless it was crashed. One that
// ends before serving is an error that carries what it said.
func TestWorkerProcessesAreStartedAndStopped(t *testing.T) {
	px, err := NewProxy()
	require.NoError(t, err)
	defer px.Close()
	root := t.TempDir()
	start := func(script string) *processWorker {
		t.Helper()
		w, err := startProcessWorker(t.Context(), fakeWorker(script), px, root)
		require.NoError(t, err)
		return w
	}
	const serve = `echo starting; echo serving on fake; while :; do sleep 0.05; done`

	w := start(`trap 'exit 0' INT; ` + serve)
	require.NoError(t, w.close(), "a clean stop")

	w = start(`trap 'echo goroutines left >&2; exit 3' INT; ` + serve)
	err = w.close()
	require.ErrorContains(t, err, "exit status 3")
	require.ErrorContains(t, err, "goroutines left", "the worker's own words")

	w = start(`trap 'exit 3' INT; ` + serve)
	w.crash()
	require.NoError(t, w.close(), "a crashed worker's status is not its own")

	_, err = startProcessWorker(t.Context(), fakeWorker(`echo no data root >&2; exit 1`), px, root)
	require.ErrorContains(t, err, "ended before serving")
	require.ErrorContains(t, err, "no data root")
}

// A port taken between its choice and the node's listen is tried again
// with another, a few times; any other error is returned at once.
func TestRetryPortTriesAnotherPort(t *testing.T) {
	var tried []string
	taken := func(addr string) (string, error) {
		tried = append(tried, addr)
		if len(tried) < 3 {
			return "", errors.New("listen tcp " + addr + ": bind: address already in use")
		}
		return addr, nil
	}
	addr, err := retryPort(taken)
	require.NoError(t, err)
	require.Len(t, tried, 3)
	require.Equal(t, tried[2], addr)

	tried = nil
	_, err = retryPort(func(addr string) (string, error) {
		tried = append(tried, addr)
		return "", errors.New("bind: address already in use")
	})
	require.Error(t, err)
	require.Len(t, tried, portTries)

	tried = nil
	_, err = retryPort(func(addr string) (string, error) {
		tried = append(tried, addr)
		return "", errors.New("permission denied")
	})
	require.ErrorContains(t, err, "permission denied")
	require.Len(t, tried, 1)
}

// Pauses nest: a worker stops at the first and goes on at the last one's
// end; resume ends them all; one more end than pauses does nothing.
func TestPausesNest(t *testing.T) {
	var calls []string
	p := pauses{stop: func() { calls = append(calls, "stop") }, cont: func() { calls = append(calls, "cont") }}
	p.pause(true)
	p.pause(true)
	p.pause(false)
	require.Equal(t, []string{"stop"}, calls, "still paused by the first")
	p.pause(false)
	p.pause(false)
	require.Equal(t, []string{"stop", "cont"}, calls)
	p.pause(true)
	p.pause(true)
	p.resume()
	p.resume()
	require.Equal(t, []string{"stop", "cont", "stop", "cont"}, calls)
}

// A frozen worker process is stopped (its "serving" loop makes no
// progress), and close resumes it before asking it to stop: a stopped
// process would never see SIGINT.
func TestFrozenWorkerProcessStillStops(t *testing.T) {
	px, err := NewProxy()
	require.NoError(t, err)
	defer px.Close()
	w, err := startProcessWorker(t.Context(), fakeWorker(`trap 'exit 0' INT; echo serving on fake; while :; do sleep 0.05; done`), px, t.TempDir())
	require.NoError(t, err)
	w.pause(true)
	stopped := func() bool { // the state /proc shows once the signal is taken
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.proc.Pid()))
		return err == nil && strings.Contains(string(st), ") T ")
	}
	require.Eventually(t, stopped, 10*time.Second, time.Millisecond, "the process is stopped")
	require.NoError(t, w.close())
}
