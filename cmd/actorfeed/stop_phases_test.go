package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
)

// SIGTERM stops run in each phase that can take long, within the bound
// of a stop, exiting 143: resolving a million names, listing a store that
// never ends its listing, looking objects up from a store that does not
// answer, and indexing objects whose bodies stall or trickle in. The
// phase is known from the store's side (the request has arrived), or, for
// the names, from the CPU the process has spent in them. A stop during
// the expansion, the look-ups or a stalled or trickling body used to be
// ignored: the job went on, until SIGKILL.
func TestSIGTERMStopsEveryPhase(t *testing.T) {
	data := genSet(t, 2, 600)
	srv, _ := serveSet(t, data)
	p := s3servertest.NewProxy(t, srv)
	srv.Env(t, p.URL)
	for _, c := range []struct {
		phase string
		data  string
		fault func(*http.Request) (s3server.Fault, bool) // the fault, and whether the phase has begun
	}{
		{phase: "expanding a million names", data: "x-{000000..999999}.tar"},
		{"listing without end", "s3://train/set/*.rio", func(r *http.Request) (s3server.Fault, bool) {
			return s3server.Fault{EndlessListing: true}, r.URL.Query().Get("continuation-token") != ""
		}},
		{"looking objects up", "s3://train/set/*.recordio", func(r *http.Request) (s3server.Fault, bool) {
			if r.Method == http.MethodHead {
				return s3server.Fault{Delay: time.Hour}, true
			}
			return s3server.Fault{}, false
		}},
		{"indexing a stalled body", "s3://train/set/*.recordio", func(r *http.Request) (s3server.Fault, bool) {
			if r.Method == http.MethodGet {
				return s3server.Fault{Stall: 10}, true
			}
			return s3server.Fault{}, false
		}},
		{"indexing a trickling body", "s3://train/set/*.recordio", func(r *http.Request) (s3server.Fault, bool) {
			if r.Method == http.MethodGet {
				return s3server.Fault{Trickle: 100 * time.Millisecond}, true
			}
			return s3server.Fault{}, false
		}},
	} {
		t.Run(c.phase, func(t *testing.T) {
			begun := make(chan struct{})
			var once sync.Once
			p.SetFaults(func(_ int, r *http.Request) s3server.Fault {
				if c.fault == nil {
					return s3server.Fault{}
				}
				f, now := c.fault(r)
				if now {
					once.Do(func() { close(begun) })
				}
				return f
			})
			proc := start(t, t.TempDir(), "run", "--data", c.data)
			if c.fault == nil {
				waitCPU(t, proc, 300*time.Millisecond)
			} else {
				select {
				case <-begun:
				case <-time.After(time.Minute):
					t.Fatal("the phase never began") // stderr is the process's until it ends
				}
			}
			code, took := proc.stop(t, syscall.SIGTERM)
			require.Equal(t, 128+int(syscall.SIGTERM), code, proc.stderr.String())
			require.Less(t, took, stopBound)
			t.Logf("%s: exit %d after %v", c.phase, code, took)
		})
	}
	p.SetFaults(nil)
}

// waitCPU waits until the process has spent d of CPU: busy in what it
// was started to do, well past installing its signal handler.
func waitCPU(t *testing.T, p *proc, d time.Duration) {
	t.Helper()
	stat := filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "stat")
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond) // polls /proc; the condition, not the time, is waited for
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		b, err := os.ReadFile(stat)
		if err != nil { // its stderr is the process's own until it ends: not read here
			t.Fatalf("the process ended before it spent %v of CPU: %v", d, err)
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		if time.Duration(utime+stime)*10*time.Millisecond >= d { // clock ticks of 10 ms
			return
		}
	}
	t.Fatalf("the process spent less than %v of CPU in a minute", d)
}

// Against a store whose bodies never end, run reads what it reads from
// disk (each range, and a little more, then the connection is dropped);
// against one whose listing loops, it fails at once with one line naming
// the prefix. The first spun at 70% of a core for ever; the second grew
// the listing until the process ran out of memory.
func TestRunAgainstAHostileStore(t *testing.T) {
	data := genSet(t, 2, 600)
	srv, _ := serveSet(t, data)
	p := s3servertest.NewProxy(t, srv)
	srv.Env(t, p.URL)
	dir := t.TempDir()
	_, stderr, code := execCLI(t, dir, runArgs(data, "local.jsonl")...)
	require.Zero(t, code, stderr)
	p.SetFaults(func(_ int, r *http.Request) s3server.Fault {
		return s3server.Fault{Endless: r.Method == http.MethodGet}
	})
	_, stderr, code = execCLI(t, dir, "run", "--data", "s3://train/set/*.recordio", "--passes", "3", "--batch", "32", "--emit-ids", "endless.jsonl")
	require.Zero(t, code, stderr)
	local, err := os.ReadFile(filepath.Join(dir, "local.jsonl"))
	require.NoError(t, err)
	endless, err := os.ReadFile(filepath.Join(dir, "endless.jsonl"))
	require.NoError(t, err)
	require.Equal(t, string(local), string(endless))

	p.SetFaults(func(_ int, r *http.Request) s3server.Fault { return s3server.Fault{RepeatToken: true} })
	_, stderr, code = execCLI(t, dir, "run", "--data", "s3://train/set/*.recordio")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	require.Contains(t, stderr, "listing s3://train/set/")
	require.Contains(t, stderr, "its listing loops")
	p.SetFaults(nil)
}
