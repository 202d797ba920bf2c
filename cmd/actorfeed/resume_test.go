package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
)

// idLines reads an --emit-ids file.
func idLines(t *testing.T, path string) []idLine {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []idLine
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l idLine
		require.NoError(t, json.Unmarshal(line, &l), "%q", line)
		out = append(out, l)
	}
	return out
}

// runArgs are a run of 3 passes over data on one device, writing ids to
// ids, and more.
func runArgs(data, ids string, more ...string) []string {
	return append([]string{"run", "--data", filepath.Join(data, "*.recordio"), "--passes", "3", "--batch", "32",
		"--emit-ids", ids}, more...)
}

// A run stopped by SIGTERM at some batch and resumed from the state it
// saved, three times over and with other numbers of readers and lanes each
// time, delivers the uninterrupted run's batches, line for line.
func TestResumeAfterSIGTERMIsTheUninterruptedRun(t *testing.T) {
	data := genSet(t, 3, 3000)
	dir := t.TempDir()
	_, stderr, code := execCLI(t, dir, runArgs(data, "full.jsonl")...)
	require.Zero(t, code, stderr)
	full, err := os.ReadFile(filepath.Join(dir, "full.jsonl"))
	require.NoError(t, err)

	var got []byte
	for i := range 4 {
		ids := fmt.Sprintf("part-%d.jsonl", i)
		args := runArgs(data, ids, "--checkpoint", "state.json", "--threads", fmt.Sprint(1+i%3), "--lanes", fmt.Sprint(1+(i+1)%3))
		if i > 0 {
			args = append(args, "--resume", "state.json")
		}
		if i < 3 {
			args = append(args, "--step", "2ms")
			p := start(t, dir, args...)
			p.waitLine(t, "pipeline:")
			waitFile(t, dir, "."+ids, 1) // some batches were consumed
			code, _ := p.stop(t, syscall.SIGTERM)
			require.Equal(t, 128+int(syscall.SIGTERM), code, p.stderr.String())
		} else {
			_, stderr, code := execCLI(t, dir, args...)
			require.Zero(t, code, stderr)
		}
		part, err := os.ReadFile(filepath.Join(dir, ids))
		require.NoError(t, err)
		got = append(got, part...)
		t.Logf("part %d: %d lines", i, bytes.Count(part, []byte("\n")))
	}
	require.Equal(t, string(full), string(got))
}

// A run killed (SIGKILL: nothing of it is saved at the end) and resumed
// from its last periodic checkpoint delivers what the uninterrupted run
// delivered after that checkpoint's position.
func TestResumeAfterSIGKILLFromTheLastCheckpoint(t *testing.T) {
	data := genSet(t, 3, 3000)
	dir := t.TempDir()
	_, stderr, code := execCLI(t, dir, runArgs(data, "full.jsonl")...)
	require.Zero(t, code, stderr)
	full := idLines(t, filepath.Join(dir, "full.jsonl"))

	p := start(t, dir, runArgs(data, "killed.jsonl", "--checkpoint", "state.json", "--checkpoint-every", "5", "--step", "2ms")...)
	waitFile(t, dir, "state.json", 1)
	require.NoError(t, p.cmd.Process.Kill())
	p.cmd.Wait()
	st, _, err := readState(filepath.Join(dir, "state.json"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "killed.jsonl"))
	require.ErrorIs(t, err, os.ErrNotExist, "a killed run leaves no partial ids file")

	_, stderr, code = execCLI(t, dir, runArgs(data, "resumed.jsonl", "--resume", "state.json", "--threads", "2")...)
	require.Zero(t, code, stderr)
	var want []idLine
	for _, l := range full {
		if l.Epoch > st.Epoch || l.Epoch == st.Epoch && uint64(l.Seq*st.Unit) >= st.Done {
			want = append(want, l)
		}
	}
	require.Less(t, len(want), len(full), "the checkpoint was taken part way")
	require.Equal(t, want, idLines(t, filepath.Join(dir, "resumed.jsonl")))
}

// sampleCount counts, per epoch, how often each sample was delivered
// (padding aside), and the batches of each file.
func sampleCount(t *testing.T, seen map[int]map[string]int, path string) int {
	t.Helper()
	lines := idLines(t, path)
	for _, l := range lines {
		if seen[l.Epoch] == nil {
			seen[l.Epoch] = map[string]int{}
		}
		for _, id := range l.IDs[:len(l.IDs)-l.Padding] {
			seen[l.Epoch][id]++
		}
	}
	return len(lines)
}

// Four ranks, four processes over the same files: disjoint, equal shares
// whose union is each epoch. Stopped at different steps and resumed as
// three from the four states: every sample not yet delivered, exactly once.
func TestRanksShareEpochsAndResumeAsFewer(t *testing.T) {
	data := genSet(t, 2, 2000)
	dir := t.TempDir()
	rank := func(r, world int, ids string, more ...string) *proc {
		args := append([]string{"run", "--data", filepath.Join(data, "*.recordio"), "--batch", "32",
			"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, more...)
		return start(t, dir, args...)
	}
	var ps []*proc
	for r := range 4 {
		ps = append(ps, rank(r, 4, fmt.Sprintf("whole-%d.jsonl", r), "--passes", "2"))
	}
	waitAll(t, ps)
	seen := map[int]map[string]int{}
	var batches []int
	for r := range 4 {
		batches = append(batches, sampleCount(t, seen, filepath.Join(dir, fmt.Sprintf("whole-%d.jsonl", r))))
	}
	require.Equal(t, []int{batches[0], batches[0], batches[0], batches[0]}, batches, "equal shares")
	for e := range 2 {
		require.Len(t, seen[e], 2000, "epoch %d: the union is the epoch", e)
		for id, k := range seen[e] {
			require.Equal(t, 1, k, "epoch %d: %s dealt to one rank", e, id)
		}
	}

	ps = ps[:0]
	for r := range 4 {
		ps = append(ps, rank(r, 4, fmt.Sprintf("a-%d.jsonl", r), "--remainder", "pad", "--max-batches", fmt.Sprint(5+r),
			"--checkpoint", fmt.Sprintf("a-%d.state", r)))
	}
	waitAll(t, ps)
	ps = ps[:0]
	for r := range 3 {
		ps = append(ps, rank(r, 3, fmt.Sprintf("b-%d.jsonl", r), "--remainder", "pad", "--resume", "a-*.state",
			"--threads", "1"))
	}
	waitAll(t, ps)
	seen = map[int]map[string]int{}
	for r := range 4 {
		require.Equal(t, 5+r, sampleCount(t, seen, filepath.Join(dir, fmt.Sprintf("a-%d.jsonl", r))))
	}
	batches = batches[:0]
	for r := range 3 {
		batches = append(batches, sampleCount(t, seen, filepath.Join(dir, fmt.Sprintf("b-%d.jsonl", r))))
	}
	require.Equal(t, []int{batches[0], batches[0], batches[0]}, batches, "the three get equal shares of the rest")
	require.Len(t, seen[0], 2000)
	for id, k := range seen[0] {
		require.Equal(t, 1, k, "%s", id)
	}
}

// --resume refuses a file that is not a state, or a state of other data,
// before anything runs, saying why.
func TestResumeRefusesWhatItCannotContinue(t *testing.T) {
	data := genSet(t, 2, 500)
	other := genSet(t, 2, 600)
	dir := t.TempDir()
	_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--checkpoint", filepath.Join(dir, "s.json"), "--max-batches", "2")
	require.NoError(t, err)
	_, err = cli(t, "run", "--data", filepath.Join(other, "*.recordio"), "--resume", filepath.Join(dir, "s.json"))
	require.ErrorIs(t, err, actors.ErrState)
	require.ErrorContains(t, err, "another data set")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{\"epoch\": 3}"), 0o644))
	_, err = cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--resume", filepath.Join(dir, "junk.json"))
	require.ErrorContains(t, err, "not a state")
	_, err = cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--checkpoint-every", "3")
	require.ErrorContains(t, err, "--checkpoint-every needs --checkpoint")
	_, err = cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--rank", "2", "--world", "2")
	require.True(t, strings.Contains(err.Error(), "--rank 2 is out of range"), err.Error())
}

// Every numeric field of a state has one range, checked as the state is
// read: a value outside it, or one its field cannot even hold, is a bad
// argument (exit 2) naming the field, never read as "nothing to do".
// Before, an epoch of 2^62 ended the job at once with exit 0, and 2^64
// exited 1 with a JSON decoder's message.
func TestResumeRefusesAStateOutOfRange(t *testing.T) {
	data := genSet(t, 2, 500)
	dir := t.TempDir()
	good := filepath.Join(dir, "s.json")
	_, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--checkpoint", good, "--max-batches", "2")
	require.NoError(t, err)
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	for _, c := range []struct{ field, value, says string }{
		{"epoch", "4611686018427387904", "epoch 4611686018427387904 is not from 0 to 4294967295"},
		{"epoch", "4294967296", "epoch 4294967296 is not from 0 to"},
		{"epoch", "-1", "epoch -1 is not from 0 to"},
		{"epoch", "18446744073709551616", "epoch: number 18446744073709551616 does not fit: it must be from 0 to 4294967295"},
		{"epoch", "1.5", "epoch: number 1.5 does not fit"},
		{"unit", "0", "unit: 0 positions an item is not from 1 to"},
		{"window", "-3", "window -3 is not from 0 to"},
		{"rank", "9223372036854775807", "rank 9223372036854775807 is not a rank"},
		{"done", "18446744073709551615", "done: 18446744073709551615 positions of a share"},
		{"version", "7", "version 7, this build reads 1"},
		{"seed", "-1", "seed: number -1 does not fit: it must be from 0 to 2^64-1"},
	} {
		var st map[string]any
		require.NoError(t, json.Unmarshal(b, &st))
		st[c.field] = json.RawMessage(c.value)
		mutated, err := json.Marshal(st)
		require.NoError(t, err)
		path := filepath.Join(dir, c.field+".json")
		require.NoError(t, os.WriteFile(path, mutated, 0o644))
		_, err = cli(t, "run", "--data", filepath.Join(data, "*.recordio"), "--resume", path)
		require.Error(t, err, "%s = %s", c.field, c.value)
		require.Equal(t, 2, exitCode(err), "%s = %s: %v", c.field, c.value, err)
		require.ErrorContains(t, err, c.says)
		require.ErrorContains(t, err, path)
	}
}

// A job whose reader is multi-pass (each pass two epochs) stopped after
// some steps, in either epoch of a pass, and resumed from its state,
// delivers the uninterrupted run's batches line for line, and its last
// resume finds nothing to do.
func TestMultiPassJobResumes(t *testing.T) {
	data := genSet(t, 2, 600)
	dir := t.TempDir()
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - {op: open_files, out: files, attrs: {file_names: [%s, %s]}}
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: 100, seed: 3}}
  - {op: create_batch_reader, in: shuffled, out: batches, attrs: {batch_size: 32}}
  - {op: create_multi_pass_reader, in: batches, out: passes, attrs: {pass_num: 2}}
  - {op: create_double_buffer_reader, in: passes, out: reader}
devices: {n: 1}
`, filepath.Join(data, fileName(0)), filepath.Join(data, fileName(1)))), 0o644))
	args := func(ids string, more ...string) []string {
		return append([]string{"run", "--spec", spec, "--passes", "2", "--emit-ids", ids}, more...)
	}
	_, stderr, code := execCLI(t, dir, args("full.jsonl")...)
	require.Zero(t, code, stderr)
	full, err := os.ReadFile(filepath.Join(dir, "full.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 4*19, bytes.Count(full, []byte("\n")), "2 passes of 2 epochs of 19 batches")

	var got []byte
	for i, steps := range []string{"10", "15", "20", "0"} { // stops in epochs 0, 1 and 2
		ids := fmt.Sprintf("part-%d.jsonl", i)
		more := []string{"--checkpoint", "state.json", "--max-batches", steps}
		if i > 0 {
			more = append(more, "--resume", "state.json")
		}
		_, stderr, code := execCLI(t, dir, args(ids, more...)...)
		require.Zero(t, code, stderr)
		part, err := os.ReadFile(filepath.Join(dir, ids))
		require.NoError(t, err)
		got = append(got, part...)
	}
	require.Equal(t, string(full), string(got))
	out, stderr, code := execCLI(t, dir, args("after.jsonl", "--resume", "state.json")...)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "nothing to do: the state is at epoch 4, and the job has 2 pass(es) of 2 epoch(s)")
}
