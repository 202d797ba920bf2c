// The race detector is off for this file's tests, as for
// package service's: the pinned protoactor-go remote races with itself in
// every process that starts and stops a node (docs/distributed.md).

//go:build !race

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// startServe starts a worker process serving files under root, and returns
// it with its address.
func startServe(t *testing.T, dir, root string) (*proc, string) {
	t.Helper()
	p := start(t, dir, "serve", "--listen", "127.0.0.1:0", "--root", root)
	for line := range p.lines {
		if addr, ok := strings.CutPrefix(line, "serving on "); ok {
			addr, _, _ = strings.Cut(addr, ",")
			return p, addr
		}
	}
	t.Fatalf("serve printed no address: %s", p.stderr.String())
	return nil, ""
}

// summaryRow is the cells of run's summary row for worker addr: addr,
// state, tasks, batches, MB, MB/s, credit, reassigned, lost.
func summaryRow(t *testing.T, out, addr string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 9 && f[0] == addr {
			return f
		}
	}
	t.Fatalf("no row for worker %s in:\n%s", addr, out)
	return nil
}

// sortedLines is a file's lines, sorted: the devices write theirs side by
// side, each line whole.
func sortedLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Sort(lines)
	return lines
}

// run --service reads through worker processes the batches a run without it
// reads, each batch on the same device at the same place in its epoch, for
// two passes; a worker killed with SIGKILL mid-run changes none. (The data
// make five tasks an epoch: every worker holds some from the start, and
// slow devices keep them unfinished when one is killed.)
func TestRunThroughServiceWorkers(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := execCLI(t, dir, "gen", "--out", "data", "--files", "8", "--samples", "40000")
	require.Zero(t, code, stderr)
	args := []string{"run", "--data", "data/*.recordio", "--batch", "32", "--devices", "2", "--passes", "2", "--seed", "9"}
	_, stderr, code = execCLI(t, dir, append(args, "--emit-ids", "local.jsonl")...)
	require.Zero(t, code, stderr)
	want := sortedLines(t, filepath.Join(dir, "local.jsonl"))

	var addrs []string
	var workers []*proc
	for range 3 {
		p, addr := startServe(t, dir, filepath.Join(dir, "data"))
		workers, addrs = append(workers, p), append(addrs, addr)
	}
	svc := append(args, "--service", strings.Join(addrs, ","), "--step", "2ms")
	_, stderr, code = execCLI(t, dir, append(svc, "--emit-ids", "service.jsonl")...)
	require.Zero(t, code, stderr)
	require.Equal(t, want, sortedLines(t, filepath.Join(dir, "service.jsonl")))

	run := start(t, dir, append(svc, "--emit-ids", "killed.jsonl", "--checkpoint", "ckpt.json", "--checkpoint-every", "100")...)
	waitFile(t, dir, "ckpt.json", 1) // 100 batches in
	require.NoError(t, workers[1].cmd.Process.Signal(syscall.SIGKILL))
	for range run.lines {
	}
	require.NoError(t, run.cmd.Wait(), run.stderr.String())
	require.Equal(t, want, sortedLines(t, filepath.Join(dir, "killed.jsonl")))
	require.Contains(t, run.stdout.String(), "worker "+addrs[1]+" was lost: its node is gone", "the summary names the lost worker")
	row := summaryRow(t, run.stdout.String(), addrs[1])
	require.Equal(t, "lost", row[1], "its state")
	reassigned, err := strconv.Atoi(row[7])
	require.NoError(t, err)
	require.Positive(t, reassigned, "its unfinished tasks went to the others")

	// The YAML equivalent: a program's service section.
	files, err := filepath.Glob(filepath.Join(dir, "data", "*.recordio"))
	require.NoError(t, err)
	spec := `startup:
  - {op: open_files, out: files, attrs: {file_names: [` + strings.Join(files, ", ") + `]}}
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: 1024, seed: 9}}
  - {op: create_batch_reader, in: shuffled, out: batches, attrs: {batch_size: 32}}
  - {op: create_double_buffer_reader, in: batches, out: reader}
devices: {n: 2, passes: 2}
service: {workers: [` + addrs[0] + `, ` + addrs[2] + `], lease: 2s}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(spec), 0o644))
	out, stderr, code := execCLI(t, dir, "run", "--spec", "p.yaml", "--emit-ids", "spec.jsonl", "--report", "report")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "on 2 worker(s) of the service")
	require.Equal(t, want, sortedLines(t, filepath.Join(dir, "spec.jsonl")))
	// The summary counts the workers' batches alive here (it said 0), and
	// the report draws the workers as the summary reports them (actors.png
	// showed alive a worker the table said closed).
	require.NotContains(t, out, "peak batches alive 0")
	require.Equal(t, "closed", summaryRow(t, out, addrs[0])[1])
	dot, err := os.ReadFile(filepath.Join(dir, "report", "actors.dot"))
	require.NoError(t, err)
	require.Contains(t, string(dot), "closed")
	require.NotContains(t, string(dot), ", alive")
}

// bench --service-workers starts its worker processes, measures the
// pipeline in process, on them and the loopback's bytes alone, with the
// CPU of every process counted, and stops the workers.
func TestBenchMeasuresTheService(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := execCLI(t, dir, "bench", "--service-workers", "1", "--sizes", "784", "--data-mb", "2", "--files", "2", "--repeat", "1")
	require.Zero(t, code, stderr)
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, cells, ok := strings.Cut(strings.TrimSpace(line), "  "); ok && name == "784" {
			f := strings.Fields(cells)
			rows[strings.Join(f[:len(f)-5], " ")] = f[len(f)-5:]
		}
	}
	require.Len(t, rows, 3, out)
	for what, cells := range rows {
		cpu, err := strconv.ParseFloat(cells[3], 64)
		require.NoError(t, err, what)
		require.Positive(t, cpu, "%s: CPU seconds per million samples", what)
	}
	require.Contains(t, rows, "on 1 worker process(es)")
	require.Contains(t, rows, "loopback TCP, the bytes alone")
}

// sim --network runs its workers as serve processes that check for leaks
// when they stop; the scenarios pass.
func TestSimNetworkRunsWorkerProcesses(t *testing.T) {
	out, stderr, code := execCLI(t, t.TempDir(), "sim", "--network", "--scenarios", "3", "--seed", "2", "--parallel", "3")
	require.Zero(t, code, stderr+out)
	require.Contains(t, out, "workers in processes")
	require.Contains(t, out, "4 network scenarios (a hostile trainer beside a well-behaved one, then 3 drawn)")
	require.Contains(t, out, "4 passed, 0 failed")
}

// serve --check-leaks stops cleanly: nothing of the worker is left once
// its node stopped. A signal's stop exits 128 + the signal, as run's does
// and the README says (it exited 0).
func TestServiceWorkerChecksForLeaks(t *testing.T) {
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		p := start(t, dir, "serve", "--listen", "127.0.0.1:0", "--root", dir, "--check-leaks")
		p.waitLine(t, "serving on ")
		code, _ := p.stop(t, sig)
		require.Equal(t, 128+int(sig), code, p.stderr.String())
		require.Contains(t, p.stderr.String(), "stopped by "+signalName(sig))
		require.NotContains(t, p.stderr.String(), "goroutine", "no leak found")
	}
}

// serve's limits are checked when its flags are read.
func TestServiceWorkerChecksItsLimits(t *testing.T) {
	for _, flag := range []string{"--max-sessions", "--max-sessions-per-trainer", "--max-tasks", "--max-tasks-per-trainer", "--max-credit"} {
		_, stderr, code := execCLI(t, t.TempDir(), "serve", flag, "0")
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, flag+" 0")
	}
}

// run --map runs the map on the workers with --service: the batches are
// those of the map in process, and what crosses is the map's output,
// float32 images four times the bytes of the uint8 ones.
func TestRunMapsOnServiceWorkers(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := execCLI(t, dir, "gen", "--out", "data", "--files", "2", "--samples", "4000")
	require.Zero(t, code, stderr)
	_, addr := startServe(t, dir, filepath.Join(dir, "data"))
	args := []string{"run", "--data", "data/*.recordio", "--batch", "32", "--devices", "2", "--passes", "1", "--seed", "3"}
	_, stderr, code = execCLI(t, dir, append(args, "--map", "normalize", "--emit-ids", "local.jsonl")...)
	require.Zero(t, code, stderr)
	workerMB := func(out string) float64 {
		mb, err := strconv.ParseFloat(summaryRow(t, out, addr)[4], 64)
		require.NoError(t, err)
		return mb
	}
	svc := append(args, "--service", addr)
	plain, stderr, code := execCLI(t, dir, svc...)
	require.Zero(t, code, stderr)
	mapped, stderr, code := execCLI(t, dir, append(svc, "--map", "normalize", "--emit-ids", "service.jsonl")...)
	require.Zero(t, code, stderr)
	require.Equal(t, sortedLines(t, filepath.Join(dir, "local.jsonl")), sortedLines(t, filepath.Join(dir, "service.jsonl")))
	require.Greater(t, workerMB(mapped), 3*workerMB(plain), "the workers sent float32 images")
}

// A blend of two corpora with a curriculum read through service workers
// delivers the ids the same job delivers in one process: the workers are
// told the weights and where the change falls, and the small corpus goes
// through epochs of its own on them as here.
func TestBlendReadsThroughServiceWorkers(t *testing.T) {
	dir := t.TempDir()
	web, code := twoCorpora(t, dir)
	args := []string{"run", "--data", web, "--data", code, "--passes", "2", "--weights", "0.7,0.3", "--weights-from", "20:0.2,0.8",
		"--global-batch", "10"}
	_, stderr, exit := execCLI(t, dir, append(args, "--emit-ids", "local.jsonl")...)
	require.Zero(t, exit, stderr)
	want := sortedLines(t, filepath.Join(dir, "local.jsonl"))
	require.NotEmpty(t, want)
	var addrs []string
	for range 2 {
		_, addr := startServe(t, dir, dir)
		addrs = append(addrs, addr)
	}
	out, stderr, exit := execCLI(t, dir, append(args, "--service", strings.Join(addrs, ","), "--emit-ids", "service.jsonl")...)
	require.Zero(t, exit, stderr)
	require.Contains(t, out, "on 2 worker(s) of the service")
	require.Equal(t, want, sortedLines(t, filepath.Join(dir, "service.jsonl")))
}
