package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
)

// A job over a Megatron-LM indexed dataset (written by NumPy as
// Megatron-LM writes it), read as packed samples in the global order: two
// ranks stopped at different steps resume as three, each a process, and
// verify-ids finds every sample of the two epochs delivered once.
func TestTokenCorpusJobResizesAndVerifies(t *testing.T) {
	dir := t.TempDir()
	data := tokenCorpus(t, dir)
	rank := tokenRanks(t, dir, data, "--batch", "8")
	var ps []*proc
	for r := range 2 {
		ps = append(ps, rank(r, 2, fmt.Sprintf("a-%d.jsonl", r), "--max-batches", fmt.Sprint(5+30*r), "--checkpoint", fmt.Sprintf("a-%d.state", r)))
	}
	waitAll(t, ps)
	ps = ps[:0]
	for r := range 3 {
		ps = append(ps, rank(r, 3, fmt.Sprintf("b-%d.jsonl", r), "--resume", "a-*.state"))
	}
	waitAll(t, ps)
	out, err := cli(t, "verify-ids", "--data", data, "--epochs", "2", filepath.Join(dir, "a-*.jsonl"), filepath.Join(dir, "b-*.jsonl"))
	require.NoError(t, err, out)
	require.Contains(t, out, "every record of 2 epoch(s) delivered exactly once")
}

// tokenRanks starts ranks of a job of two epochs in the global order over
// data with batch's flags: rank r of world, its ids to ids, and more flags.
func tokenRanks(t *testing.T, dir, data string, batch ...string) func(r, world int, ids string, more ...string) *proc {
	return func(r, world int, ids string, more ...string) *proc {
		args := append([]string{"run", "--data", data, "--shuffle", "all", "--passes", "2",
			"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, batch...)
		return start(t, dir, append(args, more...)...)
	}
}

// tokenCorpus writes a Megatron-LM indexed dataset of 500 documents into
// dir (with NumPy, as Megatron-LM writes it), and is its entry as packed
// samples of 64 tokens.
func tokenCorpus(t *testing.T, dir string) string {
	docs := make([][][]int64, 500)
	for d := range docs {
		seq := make([]int64, 1+(d*53)%200)
		for i := range seq {
			seq[i] = int64((d + i) % 50000)
		}
		docs[d] = [][]int64{seq}
	}
	oracle.Start(t).WriteIndexed(t, filepath.Join(dir, "web"), "uint16", docs)
	return "megatron(seq_len=64):" + filepath.Join(dir, "web.bin")
}

// With --global-batch, a job of two ranks stopped after a few steps and
// resumed as three processes delivers at every global step the samples
// of the uninterrupted job of one rank, and numbers the steps on.
func TestTokenCorpusGlobalBatchKeepsItsStepsAcrossAResize(t *testing.T) {
	dir := t.TempDir()
	data := tokenCorpus(t, dir)
	rank := tokenRanks(t, dir, data, "--global-batch", "11")
	whole := resizedSteps(t, dir, rank, 7)
	require.NotEmpty(t, whole)
	out, err := cli(t, "verify-ids", "--data", data, "--epochs", "2", filepath.Join(dir, "a-*.jsonl"), filepath.Join(dir, "b-*.jsonl"))
	require.NoError(t, err, out)
}

// resizedSteps runs a job of one rank uninterrupted (whole.jsonl), and the
// job as two ranks stopped after stop batches (a-R.jsonl, a-R.state)
// resumed as three (b-R.jsonl); it checks that both give every (epoch,
// step) the same ids, and returns the uninterrupted job's.
func resizedSteps(t *testing.T, dir string, rank func(r, world int, ids string, more ...string) *proc, stop int) map[[2]int][]string {
	waitAll(t, []*proc{rank(0, 1, "whole.jsonl")})
	var ps []*proc
	for r := range 2 {
		ps = append(ps, rank(r, 2, fmt.Sprintf("a-%d.jsonl", r), "--max-batches", fmt.Sprint(stop), "--checkpoint", fmt.Sprintf("a-%d.state", r)))
	}
	waitAll(t, ps)
	ps = ps[:0]
	for r := range 3 {
		ps = append(ps, rank(r, 3, fmt.Sprintf("b-%d.jsonl", r), "--resume", "a-*.state"))
	}
	waitAll(t, ps)
	whole := stepsOf(t, filepath.Join(dir, "whole.jsonl"))
	resized := stepsOf(t, filepath.Join(dir, "a-0.jsonl"), filepath.Join(dir, "a-1.jsonl"),
		filepath.Join(dir, "b-0.jsonl"), filepath.Join(dir, "b-1.jsonl"), filepath.Join(dir, "b-2.jsonl"))
	require.Equal(t, whole, resized)
	return whole
}

// stepsOf reads --emit-ids files: the ids of each (epoch, step), sorted.
func stepsOf(t *testing.T, files ...string) map[[2]int][]string {
	out := map[[2]int][]string{}
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l idLine
			require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
			k := [2]int{l.Epoch, l.Seq}
			out[k] = append(out[k], l.IDs...)
		}
		require.NoError(t, sc.Err())
		fh.Close()
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}
