package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// beCLI makes the test binary run main (see TestMain).
const beCLI = "ACTORFEED_BE_CLI"

// proc is actorfeed running as a process of its own.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	lines          chan string // stdout, line by line, while it runs
}

// start runs actorfeed with args in dir.
func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), lines: make(chan string, 1024)}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), beCLI+"=1")
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(io.TeeReader(out, &p.stdout))
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// waitLine waits for a line of stdout that starts with prefix.
func (p *proc) waitLine(t *testing.T, prefix string) {
	t.Helper()
	for line := range p.lines {
		if strings.HasPrefix(line, prefix) {
			return
		}
	}
	t.Fatalf("the process ended without printing %q: %s", prefix, p.stderr.String())
}

// waitFile waits until a file in dir whose name starts with prefix holds at
// least min bytes: the writing has begun. It watches dir with inotify, so it
// wakes on the write itself rather than polling.
func waitFile(t *testing.T, dir, prefix string, min int64) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO)
	require.NoError(t, err, "watch %s", dir)
	events := make([]byte, 64<<10)
	deadline := time.Now().Add(time.Minute)
	for { // the watch is set before the first look: no write falls between them
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), prefix) && info.Size() >= min {
				return
			}
		}
		left := time.Until(deadline)
		require.Positive(t, left, "no file %s* of %d bytes appeared in %s", prefix, min, dir)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			require.NoError(t, err)
		}
		for { // drain the events; the directory is read again above
			if n, err := unix.Read(fd, events); n <= 0 || err != nil {
				break
			}
		}
	}
}

// waitAll waits for every process of ps to end, each reading its output
// to its end, and fails the test on one that did not exit 0.
func waitAll(t *testing.T, ps []*proc) {
	t.Helper()
	for _, p := range ps {
		for range p.lines {
		}
		require.NoError(t, p.cmd.Wait(), p.stderr.String())
	}
}

// stop sends sig and waits for the process to end, returning its exit code
// and how long it took.
func (p *proc) stop(t *testing.T, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	from := time.Now()
	require.NoError(t, p.cmd.Process.Signal(sig))
	for range p.lines { // drain stdout to its end
	}
	err := p.cmd.Wait()
	took := time.Since(from)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stopped by %v, it must exit non-zero", sig)
	return ee.ExitCode(), took
}

// stopBound is how long a stopped command may take to exit. The promise is
// about 1 s; this bound leaves room for the race detector on a loaded CI
// machine, and is a guard against a hang rather than a measurement.
const stopBound = 5 * time.Second

// SIGTERM (how schedulers and container runtimes stop a trainer) killed
// every command at once, leaving half a JSON line; SIGINT was ignored by
// gen; SIGHUP (a closed terminal) left no checkpoint, no ids and a hidden
// temporary file. All three now stop a run promptly with complete outputs,
// the checkpoint and the summary.
func TestSignalStopsRunWithCompleteOutputs(t *testing.T) {
	data := genSet(t, 2, 20000)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		dir := t.TempDir()
		p := start(t, dir, "run", "--data", filepath.Join(data, "*.recordio"), "--devices", "2", "--step", "2ms", "--passes", "50",
			"--emit-ids", "ids.jsonl", "--report", "report", "--sample-every", "10ms", "--checkpoint", "state.json")
		p.waitLine(t, "pipeline:")
		waitFile(t, dir, ".ids.jsonl", 1) // a batch was written: the devices are stepping
		code, took := p.stop(t, sig)
		t.Logf("%v: exit %d after %v", sig, code, took)
		require.Equal(t, 128+int(sig), code)
		require.Less(t, took, stopBound)
		require.Contains(t, p.stdout.String(), "the summary so far")
		require.Contains(t, p.stderr.String(), "stopped by SIG")
		ids, err := os.ReadFile(filepath.Join(dir, "ids.jsonl"))
		require.NoError(t, err, "the ids of the consumed batches are kept")
		require.True(t, bytes.HasSuffix(ids, []byte("\n")))
		for _, line := range bytes.Split(bytes.TrimSuffix(ids, []byte("\n")), []byte("\n")) {
			var l idLine
			require.NoError(t, json.Unmarshal(line, &l), "every line is whole: %q", line)
		}
		onlyFiles(t, dir, "ids.jsonl", "report", "state.json")
		onlyFiles(t, filepath.Join(dir, "report"), "actors.dot", "actors.png", "buffers.png", "devices.png", "throughput.png")
	}
}

// onlyFiles checks that dir holds exactly names: no temporary or partial
// file is left.
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.ElementsMatch(t, names, got, "in %s", dir)
}

func TestSignalStopsGenAndConvertLeavingNoPartialFile(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		dir := t.TempDir()
		p := start(t, dir, "gen", "--out", "data", "--files", "1", "--samples", "5000000")
		waitFile(t, dir, "data", 0) // gen makes its directory first
		waitFile(t, filepath.Join(dir, "data"), ".part-", 0)
		code, took := p.stop(t, sig)
		t.Logf("gen, %v: exit %d after %v", sig, code, took)
		require.Equal(t, 128+int(sig), code)
		require.Less(t, took, stopBound)
		onlyFiles(t, filepath.Join(dir, "data"))

		images := filepath.Join(dir, "big-images-idx3-ubyte")
		writeIDX(t, images, 200000)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "old.recordio"), []byte("kept"), 0o644))
		p = start(t, dir, "convert", images, "--out", "old.recordio", "--compressor", "gzip")
		waitFile(t, dir, ".old.recordio", 0)
		code, took = p.stop(t, sig)
		t.Logf("convert, %v: exit %d after %v", sig, code, took)
		require.Equal(t, 128+int(sig), code)
		require.Less(t, took, stopBound)
		onlyFiles(t, dir, "data", "big-images-idx3-ubyte", "old.recordio")
		old, err := os.ReadFile(filepath.Join(dir, "old.recordio"))
		require.NoError(t, err)
		require.Equal(t, "kept", string(old), "a stopped conversion leaves the existing output as it was")
	}
}

// writeIDX writes an uncompressed IDX images file of n 28x28 images.
func writeIDX(t *testing.T, path string, n int) {
	t.Helper()
	hdr := []byte{0, 0, 8, 3}
	for _, d := range []uint32{uint32(n), 28, 28} {
		hdr = binary.BigEndian.AppendUint32(hdr, d)
	}
	body := make([]byte, n*28*28)
	for i := range body {
		body[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(path, append(hdr, body...), 0o644))
}

// sim interrupted after 116 ms reported "violation: no result within 20s:
// sim: hang": an interrupt is no violation, and the run says how far it got.
func TestSignalStopsSimWithoutAViolation(t *testing.T) {
	p := start(t, t.TempDir(), "sim", "--scenarios", "5000", "--seed", "3")
	p.waitLine(t, "running 5")
	code, took := p.stop(t, syscall.SIGINT)
	t.Logf("sim, SIGINT: exit %d after %v", code, took)
	require.Equal(t, 128+int(syscall.SIGINT), code)
	require.Less(t, took, stopBound)
	require.NotContains(t, p.stdout.String(), "violation")
	require.Regexp(t, `stopped by SIGINT after \d+ of 5\d\d\d scenarios`, p.stdout.String())
}

// inspect read a large file to its end after SIGTERM and exited 0.
func TestSignalStopsInspect(t *testing.T) {
	dir := t.TempDir()
	_, err := cli(t, "gen", "--out", dir, "--files", "1", "--samples", "60000", "--compressor", "none")
	require.NoError(t, err)
	p := start(t, dir, "inspect", fileName(0))
	p.waitLine(t, "format:")
	code, took := p.stop(t, syscall.SIGTERM)
	t.Logf("inspect, SIGTERM: exit %d after %v", code, took)
	require.Equal(t, 128+int(syscall.SIGTERM), code)
	require.Less(t, took, stopBound)
}

// A named pipe given to run (as data, where counting the samples opened it,
// or as the spec) blocked the process in open(2), deaf to signals. It is
// refused at once.
func TestNamedPipesAreRefusedNotOpened(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.recordio")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, args := range [][]string{
		{"run", "--data", fifo},
		{"run", "--spec", fifo},
		{"inspect", fifo},
		{"convert", fifo, "--out", filepath.Join(dir, "out.recordio")},
	} {
		_, stderr, code := execCLI(t, dir, args...) // fails the test if it hangs
		require.Equal(t, 1, code, "%v", args)
		require.Contains(t, stderr, "not a regular file (named pipe)", "%v", args)
	}
}

// execCLI runs the actorfeed binary (this test binary as main, see TestMain)
// with args to its end, and returns its standard output and error and its
// exit code. A run that outlasts a minute is killed and fails the test.
func execCLI(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := start(t, dir, args...)
	done := make(chan error, 1)
	go func() {
		for range p.lines {
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		if ee != nil {
			code = ee.ExitCode()
		}
	case <-time.After(time.Minute): // a guard against a hang
		t.Fatalf("%v did not end", args)
	}
	if code != 0 {
		lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
		require.Len(t, lines, 1, "%v: a failure is one line on stderr: %q", args, p.stderr.String())
	}
	return p.stdout.String(), p.stderr.String(), code
}

// Issue 17's CLI items, through the binary: convert takes the idx: prefix
// and writes the labels gen writes (int64); --report is checked before the
// run (a long run's work was lost to a bad path at its end); sim replays a
// regression by name.
func TestCLIItemsThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "x-images-idx3-ubyte")
	writeIDX(t, images, 20)
	labels := filepath.Join(dir, "x-labels-idx1-ubyte")
	require.NoError(t, os.WriteFile(labels, append([]byte{0, 0, 8, 1, 0, 0, 0, 20}, make([]byte, 20)...), 0o644))
	_, stderr, code := execCLI(t, dir, "convert", "idx:"+images, "--out", "x.recordio")
	require.Zero(t, code, stderr)
	out, _, code := execCLI(t, dir, "inspect", "x.recordio")
	require.Zero(t, code)
	require.Contains(t, out, "slots:   0: uint8[1,28,28], 1: int64[1]")
	_, stderr, code = execCLI(t, dir, "convert", "recordio:"+images, "--out", "y.recordio")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "convert reads IDX files")

	notADir := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))
	out, stderr, code = execCLI(t, dir, "run", "--data", "x.recordio", "--report", filepath.Join(notADir, "report"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--report")
	require.NotContains(t, out, "samples in", "refused before the run")

	out, _, code = execCLI(t, dir, "sim", "--replay", "panic-storm")
	require.Zero(t, code)
	require.Contains(t, out, "panic-storm")
	require.Contains(t, out, "shape: ")
}
