// The race detector is off for these tests: the pinned protoactor-go
// remote races with itself (Remote.Start sets gRPC's process-wide logger,
// and endpointManager.stop writes its fields while endpoint events read
// them), so every process that stops a node reports races that are not
// actorfeed's. CI runs them without it (README's test command).

//go:build !race

package service_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/tensor"
)

// TestMain runs a worker node instead of the tests when the test binary is
// started as one (startWorker): the tests' workers are processes of their
// own, as in production, and one process never starts two remotes (each
// Start sets gRPC's process-wide logger, which races with a running one).
func TestMain(m *testing.M) {
	if root := os.Getenv(workerEnv); root != "" {
		os.Exit(serveWorker(root))
	}
	goleak.VerifyTestMain(leakcheck.Settled(m), leakcheck.Options()...)
}

// The worker processes' settings: the data root, and optionally mutual TLS
// (cert,key,ca) and the message bound.
const (
	workerEnv    = "ACTORFEED_TEST_WORKER_ROOT"
	workerTLS    = "ACTORFEED_TEST_WORKER_TLS"
	workerMaxMsg = "ACTORFEED_TEST_WORKER_MAX_MESSAGE"
	// workerWork is how long the worker's map "work" spends on the CPU for
	// each batch (a duration; unset: none).
	workerWork = "ACTORFEED_TEST_WORKER_WORK"
	// workerListen is the worker's listen address (unset: the default).
	workerListen = "ACTORFEED_TEST_WORKER_LISTEN"
)

// work is the map "work": it spends d of CPU on a batch, as a decoding map
// does, and passes it on.
func work(d time.Duration) actors.MapFunc {
	return func(s tensor.Slots) (tensor.Slots, error) {
		for start := time.Now(); time.Since(start) < d; {
		}
		return s, nil
	}
}

// serveWorker runs a worker node until its stdin closes, having printed its
// address.
func serveWorker(root string) int {
	cfg := service.Config{Listen: os.Getenv(workerListen)}
	if files := os.Getenv(workerTLS); files != "" {
		f := strings.Split(files, ",")
		cfg.TLS = service.TLS{Cert: f[0], Key: f[1], CA: f[2]}
	}
	cfg.MaxMessage, _ = strconv.Atoi(os.Getenv(workerMaxMsg))
	spend, _ := time.ParseDuration(os.Getenv(workerWork))
	n, err := service.Listen(cfg)
	if err == nil {
		_, err = n.Serve(service.WorkerOptions{Roots: []string{root}, Threads: 2, MaxMessage: cfg.MaxMessage,
			Maps: map[string]actors.MapFunc{"work": work(spend)}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(n.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := n.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// worker is a worker node's process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string
}

// startWorkers starts k worker processes reading files under root; they
// end with the test (stdin closed, then waited for).
func startWorkers(t *testing.T, k int, root string, env ...string) []*worker {
	t.Helper()
	var ws []*worker
	for range k {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), workerEnv+"="+root), env...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		w := &worker{cmd: cmd, stdin: stdin}
		t.Cleanup(func() {
			w.stdin.Close()
			_ = w.cmd.Wait()
		})
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err, "a worker's address")
		w.addr = strings.TrimSpace(line)
		ws = append(ws, w)
	}
	return ws
}

func addrs(ws []*worker) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.addr)
	}
	return out
}

// client starts the trainer's node, closed with the test.
func client(t *testing.T) *service.Node {
	t.Helper()
	n, err := service.Listen(service.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	return n
}

// passes reads n passes of p, each a list of batches' ids, and checks every
// batch's Index.
func passes(t *testing.T, ctx context.Context, p *actors.Pipeline, n int, each func(pass, batch int)) [][][]uint64 {
	t.Helper()
	var out [][][]uint64
	for pass := range n {
		if pass > 0 {
			require.NoError(t, p.Reset())
		}
		var batches [][]uint64
		for {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.Equal(t, len(batches), it.Index, "pass %d", pass)
			batches = append(batches, it.IDs)
			if each != nil {
				each(pass, len(batches))
			}
		}
		out = append(out, batches)
	}
	return out
}

// reference is n passes of chain(paths) in this process.
func reference(t *testing.T, ctx context.Context, paths []string, n int) [][][]uint64 {
	t.Helper()
	local, err := actors.New(chain(paths), actors.Options{GroupSize: 8})
	require.NoError(t, err)
	defer func() { require.NoError(t, local.Close()) }()
	return passes(t, ctx, local, n, nil)
}

// servicePipeline is chain(paths) with svc, on node.
func servicePipeline(t *testing.T, paths []string, node *service.Node, svc *actors.Service) *actors.Pipeline {
	t.Helper()
	p, err := actors.New(chain(paths), actors.Options{System: node.System(), GroupSize: 8, Service: svc})
	require.NoError(t, err)
	return p
}

func chain(paths []string) []actors.Stage {
	return []actors.Stage{actors.Files{Paths: paths, Threads: 3}, actors.Shuffle{Window: 50, Seed: 3}, actors.Batch{Size: 16}}
}

// A pipeline whose workers are other nodes delivers, pass after pass, the
// batches the same pipeline makes in one process, each once.
func TestServiceDeliversTheBatchesOfOneProcess(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 200, 50)
	want := reference(t, ctx, paths, 2)

	ws := startWorkers(t, 3, filepath.Dir(paths[0]))
	node := client(t)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second})
	got := passes(t, ctx, p, 2, nil)
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	requireNoPipeline(t, node)
}

// Nodes listen on IPv6's loopback as on IPv4's: "[::1]:0" failed with too
// many colons in the address (issue 32).
func TestServiceOverIPv6Loopback(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 100, 50)
	want := reference(t, ctx, paths, 1)
	ws := startWorkers(t, 1, filepath.Dir(paths[0]), workerListen+"=[::1]:0")
	require.True(t, strings.HasPrefix(ws[0].addr, "[::1]:"), ws[0].addr)
	node, err := service.Listen(service.Config{Listen: "[::1]:0"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, node.Close()) })
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Lease: time.Second})
	require.Equal(t, want, passes(t, ctx, p, 1, nil))
	require.NoError(t, p.Close())
}

// requireNoPipeline fails if an actor other than the remote's own is
// alive on node n.
func requireNoPipeline(t *testing.T, n *service.Node) {
	t.Helper()
	var left []string
	for _, id := range registered.Actors(n.System()) {
		if !strings.HasPrefix(id, "EndpointSupervisor") && id != "activator" && !strings.HasPrefix(id, "guardian") {
			left = append(left, id)
		}
	}
	require.Empty(t, left, "actors left on %s", n.Address())
}

// A worker killed mid-pass (SIGKILL: its connections drop) has its tasks
// taken over by the others: every batch still comes once, in the order,
// and the pass is that of one process.
func TestServiceSurvivesALostWorker(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 300, 50)
	want := reference(t, ctx, paths, 1)

	ws := startWorkers(t, 3, filepath.Dir(paths[0]))
	node := client(t)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second})
	got := passes(t, ctx, p, 1, func(_, batch int) {
		if batch == 20 {
			require.NoError(t, ws[1].cmd.Process.Kill())
		}
	})
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	requireNoPipeline(t, node)
}

// A worker that stops answering (SIGSTOP: its connection stays open) is
// taken for lost once unheard for the lease, and its tasks go to the
// others; let go on, what it sends of its old attempts is dropped. Every
// batch comes once, in the order.
func TestServiceFencesAWorkerThatStoppedAnswering(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 300, 50)
	want := reference(t, ctx, paths, 2)

	ws := startWorkers(t, 3, filepath.Dir(paths[0]))
	node := client(t)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second})
	hung := ws[1].cmd.Process
	t.Cleanup(func() { _ = hung.Signal(syscall.SIGCONT) })
	resumed := false
	got := passes(t, ctx, p, 2, func(pass, batch int) {
		if pass == 0 && batch == 10 {
			require.NoError(t, hung.Signal(syscall.SIGSTOP))
		}
		if !resumed && p.ServiceWorkers()[1].Lost > 0 {
			resumed = true
			require.NoError(t, hung.Signal(syscall.SIGCONT))
		}
	})
	lost := p.ServiceWorkers()[1]
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	require.Equal(t, int64(1), lost.Lost)
	require.Contains(t, lost.Why, "not heard from")
	requireNoPipeline(t, node)
}

// With every worker gone, the pipeline waits WaitForWorkers for one, then
// fails with ErrNoWorkers.
func TestServiceFailsOnceNoWorkerCameBack(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 300, 50)
	ws := startWorkers(t, 2, filepath.Dir(paths[0]))
	node := client(t)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second, WaitForWorkers: time.Second})
	defer p.Close()
	_, err := p.Next(ctx)
	require.NoError(t, err)
	for _, w := range ws {
		require.NoError(t, w.cmd.Process.Kill())
	}
	for err == nil {
		_, err = p.Next(ctx)
	}
	require.ErrorIs(t, err, actors.ErrNoWorkers)
}

// A worker refuses a task whose files lie outside its data roots, one
// whose batches exceed its message bound, and a session whose message
// bound differs from its own (a trainer whose --max-message was below the
// worker's got 60 samples/s, at 100 bytes none, and no error), and the
// pipeline fails saying so.
func TestServiceWorkersRefuseWhatTheyMustNotDo(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 100, 50)
	for name, c := range map[string]struct {
		root, env, want string
		maxMessage      int
	}{
		"outside the roots": {root: t.TempDir(), want: "outside the worker's data roots"},
		"above the bound":   {root: filepath.Dir(paths[0]), env: workerMaxMsg + "=100", maxMessage: 100, want: "above the worker's bound of 100"},
		"bounds differ": {root: filepath.Dir(paths[0]), env: workerMaxMsg + "=100",
			want: "refused this pipeline's session: this worker's --max-message is 100 bytes, the trainer's 67108864"},
	} {
		ws := startWorkers(t, 1, c.root, c.env)
		node := client(t)
		p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Lease: time.Second, MaxMessage: c.maxMessage})
		_, err := p.Next(ctx)
		require.ErrorContains(t, err, c.want, name)
		require.NoError(t, p.Close())
	}
}

// Batches above gRPC's 4 MiB default message size cross (16 samples of
// 300 KB: 4.8 MB a batch), and are the in-process pipeline's.
func TestServiceCarriesBatchesAboveFourMiB(t *testing.T) {
	ctx := testutil.Context(t)
	dir := t.TempDir()
	var paths []string
	for f := range 2 {
		paths = append(paths, testutil.WriteRecords(t, filepath.Join(dir, fmt.Sprintf("big-%d.rio", f)), 0, 40, func(r int) tensor.Slots {
			img := make([]uint8, 300<<10)
			img[r] = uint8(f + 1)
			return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, len(img)}, img)}}
		}))
	}
	stages := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 8, Seed: 1}, actors.Batch{Size: 16}}
	read := func(opts actors.Options) (ids [][]uint64, sums []int) {
		p, err := actors.New(stages, opts)
		require.NoError(t, err)
		defer func() { require.NoError(t, p.Close()) }()
		for {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				return ids, sums
			}
			require.NoError(t, err)
			sum := 0
			for _, b := range it.Slots[0].Bytes() {
				sum += int(b)
			}
			ids, sums = append(ids, it.IDs), append(sums, sum)
		}
	}
	wantIDs, wantSums := read(actors.Options{})
	ws := startWorkers(t, 1, dir)
	node := client(t)
	gotIDs, gotSums := read(actors.Options{System: node.System(), Service: &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second}})
	require.Equal(t, wantIDs, gotIDs)
	require.Equal(t, wantSums, gotSums, "the bytes came whole")
}

// A trainer's Close is bounded when a worker stops answering (SIGSTOP: its
// connections stay open, nothing comes back): the pipeline's Close waits on
// no worker, and the node's on the remote's graceful stop at most.
func TestServiceCloseIsBoundedWithAFrozenWorker(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 4, 300, 50)
	ws := startWorkers(t, 1, filepath.Dir(paths[0]))
	frozen := ws[0].cmd.Process
	t.Cleanup(func() { _ = frozen.Signal(syscall.SIGCONT) })
	node, err := service.Listen(service.Config{})
	require.NoError(t, err)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs(ws), Credit: 2, Lease: time.Second})
	_, err = p.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, frozen.Signal(syscall.SIGSTOP))
	requireReturns(t, ctx, func() error { return errors.Join(p.Close(), node.Close()) }, "Close did not return with a frozen worker")
}

// requireReturns requires stop to return, with no error, before ctx ends:
// a guard against a hang, not a measurement.
func requireReturns(t *testing.T, ctx context.Context, stop func() error, hung string) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- stop() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal(hung)
	}
}

// A node's Close is bounded when a peer opened a connection and sent
// nothing (a frozen worker caught mid-dial, a link stalled before its
// first bytes): gRPC's server stop waits for every connection's handshake,
// which it gave 120 s. sim --network found scenarios whose stop took 2m2s.
func TestServiceNodeCloseIsBoundedWithAConnectionThatSaysNothing(t *testing.T) {
	ctx := testutil.Context(t)
	node, err := service.Listen(service.Config{})
	require.NoError(t, err)
	mute, err := net.Dial("tcp", node.Address())
	require.NoError(t, err)
	defer mute.Close()
	// The server sends its settings once it took the connection, then
	// waits for the client's preface: from here its handshake is under way.
	deadline, _ := ctx.Deadline()
	require.NoError(t, mute.SetReadDeadline(deadline))
	_, err = io.ReadFull(mute, make([]byte, 9)) // an HTTP/2 frame header
	require.NoError(t, err)
	requireReturns(t, ctx, node.Close, "Close did not return with a connection that sent nothing")
}

// Tasks go to the workers as they can take them: of two workers, the one
// whose map costs 20 ms of CPU a batch more does fewer of them, and the
// batches are those of one process with the same map. The credit (16)
// holds a whole task (about 12 batches): the order lets a fast worker run
// ahead of the head task only that far. (Before, a worker held its tasks
// until they were handed on, and each did 6 of the 12.)
func TestServiceFastWorkerTakesMoreTasks(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 200, 50)
	stages := append(chain(paths), actors.Map{Fn: work(0), Name: "work"})
	local, err := actors.New(stages, actors.Options{GroupSize: 8})
	require.NoError(t, err)
	want := passes(t, ctx, local, 1, nil)
	require.NoError(t, local.Close())

	fast := startWorkers(t, 1, filepath.Dir(paths[0]))
	slow := startWorkers(t, 1, filepath.Dir(paths[0]), workerWork+"=20ms")
	node := client(t)
	p, err := actors.New(stages, actors.Options{System: node.System(), GroupSize: 8,
		Service: &actors.Service{Workers: addrs(append(fast, slow...)), Credit: 16, Lease: 5 * time.Second}})
	require.NoError(t, err)
	require.Equal(t, want, passes(t, ctx, p, 1, nil))
	tasks := map[string]int64{}
	for _, w := range p.ServiceWorkers() {
		tasks[w.Addr] = w.Tasks
	}
	require.NoError(t, p.Close())
	t.Logf("tasks: fast %d, slow %d", tasks[fast[0].addr], tasks[slow[0].addr])
	require.Greater(t, tasks[fast[0].addr], tasks[slow[0].addr])
}

// A worker at its limits answers busy: the pipeline gives the task to
// another worker or later, and delivers the batches of one process, each
// once. Here each worker runs one task of a client at a time, and the
// pipeline asks for three: a worker whose one slot held a task past the
// head (waiting for credit the head's batches bring) refused the head for
// good, and the pass hung, until the pipeline took such a task back.
func TestServiceTakesBusyWorkersInItsStride(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 12, 200, 50)
	want := reference(t, ctx, paths, 2)
	var ws []*service.Worker
	var addrs []string
	for range 2 {
		n, err := service.Listen(service.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, n.Close()) })
		w, err := n.Serve(service.WorkerOptions{Roots: []string{filepath.Dir(paths[0])}, Threads: 2, Limits: service.WorkerLimits{TasksPerClient: 1}})
		require.NoError(t, err)
		ws, addrs = append(ws, w), append(addrs, n.Address())
	}
	node := client(t)
	p := servicePipeline(t, paths, node, &actors.Service{Workers: addrs, Credit: 2, Tasks: 3, Lease: time.Second})
	got := passes(t, ctx, p, 2, nil)
	require.NoError(t, p.Close())
	require.Equal(t, want, got)
	busy := int64(0)
	for _, w := range ws {
		busy += w.Stats().Busy
	}
	t.Logf("answered busy %d times", busy)
	require.Positive(t, busy, "the limit was met")
}
