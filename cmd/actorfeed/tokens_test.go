package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
)

// A job over a Megatron-LM indexed dataset (written by NumPy as
// Megatron-LM writes it), read as packed samples in the global order: two
// ranks stopped at different steps resume as three, each a process, and
// verify-ids finds every sample of the two epochs delivered once.
func TestTokenCorpusJobResizesAndVerifies(t *testing.T) {
	docs := make([][][]int64, 500)
	for d := range docs {
		seq := make([]int64, 1+(d*53)%200)
		for i := range seq {
			seq[i] = int64((d + i) % 50000)
		}
		docs[d] = [][]int64{seq}
	}
	dir := t.TempDir()
	oracle.Start(t).WriteIndexed(t, filepath.Join(dir, "web"), "uint16", docs)
	data := "megatron(seq_len=64):" + filepath.Join(dir, "web.bin")
	rank := func(r, world int, ids string, more ...string) *proc {
		args := append([]string{"run", "--data", data, "--shuffle", "all", "--batch", "8", "--passes", "2",
			"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, more...)
		return start(t, dir, args...)
	}
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
