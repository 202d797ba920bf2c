package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
)

// rankRun runs rank r of world over data's files with the batch of 64,
// writing its ids to ids, and more; it returns run's exit code and stderr.
func rankRun(t *testing.T, dir, data string, r, world int, ids string, more ...string) (int, string) {
	t.Helper()
	args := append([]string{"run", "--data", filepath.Join(data, "*.recordio"), "--batch", "64",
		"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, more...)
	_, stderr, code := execCLI(t, dir, args...)
	return code, stderr
}

// The job: 20,000 samples in 4 files, batch 64, two ranks stopped
// after 30 and 40 batches, resumed as three (from one rank's state 640
// samples were lost, from the other's repeated), stopped at different
// steps again and resumed as one. verify-ids over every run's ids finds
// each record once (one left out by the remainder policy, and said so),
// and fails when a run's ids are missing or given as another run's.
func TestJobResizedFromRanksAtDifferentStepsVerifies(t *testing.T) {
	data := genSet(t, 4, 20000)
	dir := t.TempDir()
	for r, steps := range []int{30, 40} {
		code, stderr := rankRun(t, dir, data, r, 2, fmt.Sprintf("a%d.jsonl", r), "--max-batches", fmt.Sprint(steps),
			"--checkpoint", fmt.Sprintf("a%d.state", r))
		require.Zero(t, code, stderr)
	}
	for r, steps := range []int{20, 25, 33} {
		code, stderr := rankRun(t, dir, data, r, 3, fmt.Sprintf("b%d.jsonl", r), "--max-batches", fmt.Sprint(steps),
			"--resume", "a*.state", "--checkpoint", fmt.Sprintf("b%d.state", r))
		require.Zero(t, code, stderr)
	}
	code, stderr := rankRun(t, dir, data, 0, 1, "c.jsonl", "--resume", "b0.state,b1.state", "--resume", "b2.state")
	require.Zero(t, code, stderr)

	verify := func(ids ...string) (string, string, int) {
		return execCLI(t, dir, append([]string{"verify-ids", "--data", filepath.Join(data, "*.recordio")}, ids...)...)
	}
	out, stderr, code := verify("a*.jsonl", "b*.jsonl", "c.jsonl")
	require.Zero(t, code, stderr+out)
	require.Contains(t, out, "every record of 1 epoch(s) delivered exactly once")
	require.Regexp(t, `0\s+20000\s+19999\s+0\s+0\s+0\s+1\s+0`, out, "one record left out by the re-deal to 3 ranks under drop")

	out, stderr, code = verify("a*.jsonl", "b0.jsonl", "b2.jsonl", "c.jsonl")
	require.Equal(t, 1, code, out)
	require.Contains(t, stderr, "epoch 0: 1600 lost")
	require.Contains(t, out, "epoch 0, lost: part-")

	require.NoError(t, os.Link(filepath.Join(dir, "a0.jsonl"), filepath.Join(dir, "hard.jsonl")))
	require.NoError(t, os.Symlink("a0.jsonl", filepath.Join(dir, "soft.jsonl")))
	out, stderr, code = verify("a*.jsonl", "b*.jsonl", "c.jsonl", "hard.jsonl", "soft.jsonl")
	require.Zero(t, code, "a link to a file is the same file, read once: %s", stderr+out)
	copyFile(t, filepath.Join(dir, "a0.jsonl"), filepath.Join(dir, "copy.jsonl"))
	_, stderr, code = verify("a*.jsonl", "b*.jsonl", "c.jsonl", "copy.jsonl")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "epoch 0: 1920 duplicated")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// twoRanksStopped runs two ranks over data, stopped after 3 and 4 batches,
// their states s0.json and s1.json in dir, and returns the path in dir of
// a name.
func twoRanksStopped(t *testing.T, data, dir string) func(name string) string {
	t.Helper()
	in := func(name string) string { return filepath.Join(dir, name) }
	for r := range 2 {
		_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--rank", fmt.Sprint(r), "--world", "2",
			"--max-batches", fmt.Sprint(3+r), "--checkpoint", in(fmt.Sprintf("s%d.json", r)))
		require.NoError(t, err)
	}
	return in
}

// States that are not every rank's of one job are refused before anything
// runs, exit 2, naming the file and what is missing or differs.
func TestResumeRefusesStatesThatAreNotOneJobs(t *testing.T) {
	data := genSet(t, 2, 3000)
	dir := t.TempDir()
	in := twoRanksStopped(t, data, dir)
	_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--seed", "2", "--max-batches", "2", "--checkpoint", in("other-seed.json"))
	require.NoError(t, err)
	copyFile(t, in("s0.json"), in("s0-again.json"))
	for _, c := range []struct {
		resume      string
		rank, world int
		want        string
	}{
		{in("s1.json"), 0, 3, "s1.json: actors: no resumable state: the state is rank 1's of a job of 2 ranks: resuming on 3 rank(s) needs the states of all 2"},
		{in("s1.json"), 0, 2, "s1.json: actors: no resumable state: the state is rank 1's and this is rank 0"},
		{in("s0.json") + "," + in("s0-again.json"), 0, 3, "s0-again.json: actors: no resumable state: rank 0's state is given twice"},
		{in("s0.json") + "," + in("other-seed.json"), 0, 3, "other-seed.json: actors: no resumable state: cannot resume from this state: its order is seed 2"},
		{in("s*.json"), 0, 3, "rank 0's state is given twice"},
	} {
		_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--rank", fmt.Sprint(c.rank), "--world", fmt.Sprint(c.world),
			"--resume", c.resume)
		require.Equal(t, 2, exitCode(err), "%s: %v", c.resume, err)
		require.ErrorContains(t, err, c.want)
	}
}

// Two outputs on one path, or an output on a state every new rank reads,
// are refused with exit 2, and the state is left as it was.
func TestOutputsOnOnePathAreRefused(t *testing.T) {
	data := genSet(t, 2, 2000)
	dir := t.TempDir()
	in := twoRanksStopped(t, data, dir)
	state, err := os.ReadFile(in("s0.json"))
	require.NoError(t, err)
	run := func(more ...string) error {
		_, err := cli(t, append([]string{"run", "--data", filepath.Join(data, "*.recordio")}, more...)...)
		return err
	}
	for _, args := range [][]string{
		{"--emit-ids", in("x"), "--checkpoint", in("x")},
		{"--world", "2", "--resume", in("s0.json"), "--emit-ids", in("s0.json")},
		{"--resume", in("s0.json") + "," + in("s1.json"), "--checkpoint", in("s0.json")},
		{"--emit-ids", filepath.Join(data, "part-00000.recordio")},
	} {
		err := run(args...)
		require.Equal(t, 2, exitCode(err), "%v: %v", args, err)
	}
	after, err := os.ReadFile(in("s0.json"))
	require.NoError(t, err)
	require.Equal(t, state, after)
	require.NoError(t, run("--world", "2", "--resume", in("s0.json"), "--checkpoint", in("s0.json")),
		"a rank's own state, replaced by its checkpoint: a re-queued job's command")
}

// A run stopped before its pipeline was built (SIGTERM in its first
// milliseconds, while its file list is still being resolved) leaves a
// state all the same: the job's start when it starts afresh, its rank's
// share of the re-dealt rest when it resumes. Resumed from those, the job
// delivers every record once.
func TestStoppedBeforeItsPipelineLeavesAState(t *testing.T) {
	data := genSet(t, 2, 4000)
	dir := t.TempDir()
	in := func(name string) string { return filepath.Join(dir, name) }
	stopped, cancel := context.WithCancelCause(t.Context())
	cancel(interrupted{syscall.SIGTERM})
	early := func(args ...string) {
		root := newRoot()
		root.SetArgs(append([]string{"run", "--data", filepath.Join(data, "*.recordio")}, args...))
		root.SetOut(&discard{})
		require.Error(t, root.ExecuteContext(stopped))
	}
	early("--checkpoint", in("fresh.json"), "--rank", "1", "--world", "2")
	var st actors.State
	b, err := os.ReadFile(in("fresh.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	require.True(t, st.Fresh)

	_, err = cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--max-batches", "5", "--world", "2",
		"--checkpoint", in("s0.json"), "--emit-ids", in("a0.jsonl"))
	require.NoError(t, err)
	for r := range 3 {
		early("--checkpoint", in(fmt.Sprintf("e%d.json", r)), "--rank", fmt.Sprint(r), "--world", "3",
			"--resume", in("s0.json")+","+in("fresh.json"))
	}
	for r := range 3 {
		_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--rank", fmt.Sprint(r), "--world", "3",
			"--resume", in(fmt.Sprintf("e%d.json", r)), "--emit-ids", in(fmt.Sprintf("b%d.jsonl", r)))
		require.NoError(t, err)
	}
	out, err := cli(t, "verify-ids", "--data", filepath.Join(data, "*.recordio"), in("*.jsonl"))
	require.NoError(t, err, out)

	// Stopped while its files were being found, before its outputs were
	// checked against them, a run writes no state over a file that is not
	// one: here, a data file named as the checkpoint.
	victim := filepath.Join(data, fileName(0))
	before, err := os.ReadFile(victim)
	require.NoError(t, err)
	early("--checkpoint", victim)
	after, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, before, after, "the data file is as it was")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// The README's job sequence (two ranks stopped at different steps,
// resumed as three, verified) runs as written and verifies.
func TestREADMEJobSequenceRuns(t *testing.T) {
	out := runREADMEBlock(t, "the job sequence", func(b string) bool {
		return strings.Contains(b, "verify-ids") && strings.Contains(b, "--resume")
	})
	require.Contains(t, out, "every record of 1 epoch(s) delivered exactly once")
}

// runREADMEBlock runs the README's sh block that is, as written, in a
// directory of its own with the test binary as the CLI, and returns its
// output.
func runREADMEBlock(t *testing.T, what string, is func(block string) bool) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var block string
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if is(b[1]) {
			block = b[1]
		}
	}
	require.NotEmpty(t, block, "the README shows %s", what)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(os.Args[0], filepath.Join(dir, "actorfeed"))) // the test binary runs as the CLI
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), beCLI+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// --resume reads no more than a job's states: more bytes of states than
// the budget are refused, as a bad command line, before any is used; a
// file named twice (through a link too) is read once.
func TestResumeBoundsWhatItReads(t *testing.T) {
	data := genSet(t, 2, 2000)
	dir := t.TempDir()
	in := twoRanksStopped(t, data, dir)
	require.NoError(t, os.Symlink("s0.json", in("link.json")))
	r, err := readStates([]string{in("s*.json"), in("link.json")}, maxStatesBytes)
	require.NoError(t, err)
	require.Len(t, r.states, 2)
	_, err = readStates([]string{in("s*.json")}, 500)
	require.Equal(t, 2, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "more than 500 bytes")
}

// SIGTERM while run builds its pipeline (over many files, each indexed
// first; its outputs were prepared just before, so its handler is in
// place): it exits 143 and leaves a state that resumes, from which the job
// delivers every record once.
func TestSIGTERMWhileBuildingLeavesAState(t *testing.T) {
	data := genSet(t, 64, 6400)
	dir := t.TempDir()
	p := start(t, dir, "run", "--data", filepath.Join(data, "*.recordio"), "--checkpoint", "state.json", "--emit-ids", "a.jsonl")
	waitFile(t, dir, ".a.jsonl", 0)
	code, _ := p.stop(t, syscall.SIGTERM)
	require.Equal(t, 128+int(syscall.SIGTERM), code, p.stderr.String())
	_, stderr, code := execCLI(t, dir, "run", "--data", filepath.Join(data, "*.recordio"), "--resume", "state.json", "--emit-ids", "b.jsonl")
	require.Zero(t, code, stderr)
	out, stderr, code := execCLI(t, dir, "verify-ids", "--data", filepath.Join(data, "*.recordio"), "--epochs", "1", "a.jsonl", "b.jsonl")
	require.Zero(t, code, stderr+out)
}

// Over 100 scenarios the table shows failures only, and says so: sim
// --scenarios 200 printed no rows and no word of why.
func TestSimSaysItHidesPassedRows(t *testing.T) {
	stopped, cancel := context.WithCancel(t.Context())
	cancel() // the header is all this test needs
	root := newRoot()
	root.SetArgs([]string{"sim", "--scenarios", "200", "--regressions=false"})
	var out strings.Builder
	root.SetOut(&out)
	_ = root.ExecuteContext(stopped)
	require.Contains(t, out.String(), "running 200 scenarios")
	require.Contains(t, out.String(), "(over 100: the table shows failed ones only; --show all lists every one)")
}

// The README's WebDataset block converts Fashion-MNIST to shards and runs
// a pipeline over them, as written.
func TestREADMEWebDatasetBlockRuns(t *testing.T) {
	testutil.FashionDir(t)
	out := runREADMEBlock(t, "WebDataset shards", func(b string) bool { return strings.Contains(b, "--to wds") })
	require.Contains(t, out, "wrote 10000 samples to 1 shard(s)")
	require.Contains(t, out, "20000 samples in 158 batches, 2 pass(es)")
}

// The README's TFRecord block converts Fashion-MNIST to TFRecord and runs
// a pipeline over it by the features it names.
func TestREADMETFRecordBlockRuns(t *testing.T) {
	testutil.FashionDir(t)
	out := runREADMEBlock(t, "TFRecord files", func(b string) bool { return strings.Contains(b, "--to tfrecord") })
	require.Contains(t, out, "wrote 10000 samples to 1 shard(s)")
	require.Contains(t, out, "20000 samples in 158 batches, 2 pass(es)")
}
