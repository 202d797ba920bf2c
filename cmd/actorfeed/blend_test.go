package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
)

// twoCorpora writes two Megatron-LM indexed datasets into dir with
// NumPy, "web" of 500 documents and "code" of 40 short ones, and returns
// their entries as packed samples of 16 tokens.
func twoCorpora(t *testing.T, dir string) (web, code string) {
	o := oracle.Start(t)
	for _, c := range []struct {
		name string
		docs int
	}{{"web", 500}, {"code", 40}} {
		docs := make([][][]int64, c.docs)
		for d := range docs {
			seq := make([]int64, 1+(d*37)%90)
			for i := range seq {
				seq[i] = int64((d*7 + i) % 30000)
			}
			docs[d] = [][]int64{seq}
		}
		o.WriteIndexed(t, filepath.Join(dir, c.name), "uint16", docs)
	}
	return "megatron(seq_len=16):" + filepath.Join(dir, "web.bin"), "megatron(seq_len=16):" + filepath.Join(dir, "code.bin")
}

// A blend of two corpora at 0.3 and 0.7, where the small corpus runs
// through several epochs of its own in each of the blend's: a job of two
// ranks stopped at step 9 and resumed as three delivers at every global
// step the samples of the uninterrupted job of one rank, every step holds
// the weights' share of each corpus within two samples, the weights
// change at step 20 (--weights-from), and verify-ids finds every position
// of both epochs once.
func TestBlendedCorporaKeepTheirStepsAndWeightsAcrossAResize(t *testing.T) {
	dir := t.TempDir()
	web, code := twoCorpora(t, dir)
	blend := []string{"--weights", "0.7,0.3", "--weights-from", "20:0.2,0.8", "--global-batch", "10"}
	rank := func(r, world int, ids string, more ...string) *proc {
		args := append([]string{"run", "--data", web, "--data", code, "--passes", "2",
			"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, blend...)
		return start(t, dir, append(args, more...)...)
	}
	whole := resizedSteps(t, dir, rank, 9)

	perEpoch := len(whole) / 2
	require.Greater(t, perEpoch, 20)
	var codeMax uint64
	for k, ids := range whole {
		var n int
		for _, id := range ids {
			if name, q, _ := strings.Cut(id, "#"); name == "code.bin" {
				n++
				v, err := strconv.ParseUint(q, 10, 64)
				require.NoError(t, err)
				codeMax = max(codeMax, v)
			}
		}
		share := 0.3
		if k[0]*perEpoch+k[1] >= 20 {
			share = 0.8
		}
		require.InDelta(t, share*10, float64(n), 2.5, "step %v: %d samples of code", k, n)
	}
	require.Greater(t, codeMax, uint64(200), "the small corpus ran epochs of its own")

	args := []string{"verify-ids", "--data", web, "--data", code, "--epochs", "2", "--weights", "0.7,0.3", "--weights-from", "20:0.2,0.8", "--global-batch", "10",
		filepath.Join(dir, "a-*.jsonl"), filepath.Join(dir, "b-*.jsonl")}
	out, err := cli(t, args...)
	require.NoError(t, err, out)
	require.Contains(t, out, "delivered exactly once")
	// Other weights than the job's are not its blend.
	args[8] = "0.5,0.5"
	out, err = cli(t, args...)
	require.Error(t, err, out)
}

// Resuming a blend with other weights is refused, naming the blends.
func TestBlendRefusesAStateOfAnotherBlend(t *testing.T) {
	dir := t.TempDir()
	web, code := twoCorpora(t, dir)
	run := func(weights string, more ...string) (string, error) {
		return cli(t, append([]string{"run", "--data", web, "--data", code, "--weights", weights, "--global-batch", "8"}, more...)...)
	}
	state := filepath.Join(dir, "a.state")
	out, err := run("1,1", "--max-batches", "3", "--checkpoint", state)
	require.NoError(t, err, out)
	_, err = run("2,1", "--resume", state)
	require.ErrorContains(t, err, "its blend is")
	out, err = cli(t, "run", "--data", web, "--weights", "1,1")
	require.ErrorContains(t, err, "--weights gives 2 weights and --data names 1 files", out)
	out, err = cli(t, "run", "--data", web, "--data", code, "--weights", "1,1", "--weights-from", "5:1,0")
	require.ErrorContains(t, err, "needs --global-batch", out)
}

// A YAML program blends as the flags do: open_files' weights and a phase
// from a position of the run; verify-ids given the weights without the
// phase finds that the ids are not that blend's.
func TestSpecBlendsItsFiles(t *testing.T) {
	dir := t.TempDir()
	web, code := twoCorpora(t, dir)
	spec := filepath.Join(dir, "blend.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - op: open_files
    out: files
    attrs:
      file_names: ["%s", "%s"]
      weights: [3, 1]
      weight_phases: [{from: 100, weights: [1, 3]}]
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: all, seed: 4}}
  - {op: create_batch_reader, in: shuffled, out: reader, attrs: {batch_size: 8}}
main:
  passes: 2
devices: {n: 1}
`, web, code)), 0o644))
	ids := filepath.Join(dir, "ids.jsonl")
	out, err := cli(t, "run", "--spec", spec, "--emit-ids", ids)
	require.NoError(t, err, out)
	steps := stepsOf(t, ids)
	var early, late int // code's samples in positions 0-95 and 104-199
	for k, step := range steps {
		for _, id := range step {
			if strings.HasPrefix(id, "code.bin#") {
				switch {
				case k[0] == 0 && k[1] < 12:
					early++
				case k[0] == 0 && k[1] >= 13 && k[1] < 25:
					late++
				}
			}
		}
	}
	require.InDelta(t, 96/4, early, 2)
	require.InDelta(t, 96*3/4, late, 2)
	out, err = cli(t, "verify-ids", "--data", web, "--data", code, "--weights", "3,1", "--epochs", "2", ids)
	require.Error(t, err, "verify-ids without the phase is not the job's blend: %s", out)
}
