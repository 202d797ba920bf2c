package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
)

// A job in the global order (--shuffle all over gen's IDX pairs): four
// ranks stopped at different steps resume as three, each a process, and
// verify-ids finds every sample of the two epochs delivered once; the
// pipeline's line names the shuffle; a RecordIO file is refused, named.
func TestGlobalOrderJobResizesAndVerifies(t *testing.T) {
	data := genSet(t, 2, 2000, "--to", "idx")
	images := filepath.Join(data, "*images*")
	dir := t.TempDir()
	rank := func(r, world int, ids string, more ...string) *proc {
		args := append([]string{"run", "--data", images, "--shuffle", "all", "--batch", "32", "--passes", "2",
			"--remainder", "pad", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--emit-ids", ids}, more...)
		return start(t, dir, args...)
	}
	var ps []*proc
	for r := range 4 {
		ps = append(ps, rank(r, 4, fmt.Sprintf("a-%d.jsonl", r), "--max-batches", fmt.Sprint(3+4*r), "--checkpoint", fmt.Sprintf("a-%d.state", r)))
	}
	waitAll(t, ps)
	require.Contains(t, ps[0].stdout.String(), "shuffle(all)")
	ps = ps[:0]
	for r := range 3 {
		ps = append(ps, rank(r, 3, fmt.Sprintf("b-%d.jsonl", r), "--resume", "a-*.state", "--threads", "1"))
	}
	waitAll(t, ps)
	out, err := cli(t, "verify-ids", "--data", images, "--epochs", "2", filepath.Join(dir, "a-*.jsonl"), filepath.Join(dir, "b-*.jsonl"))
	require.NoError(t, err, out)
	require.Contains(t, out, "every record of 2 epoch(s) delivered exactly once")

	rio := genSet(t, 1, 100)
	_, err = cli(t, "run", "--data", filepath.Join(rio, "*.recordio"), "--shuffle", "all")
	require.ErrorContains(t, err, "part-00000.recordio is RecordIO, whose checksums cover whole chunks")
}

// WebDataset shards served as objects are read in the global order from
// the object cache's copies, id for id as the files on disk; without the
// cache, whose absence would make every record a GET of its own, the run
// is refused, naming the object and the cache's variable.
func TestGlobalOrderReadsObjectsFromTheirCopies(t *testing.T) {
	data := genSet(t, 2, 200, "--to", "wds", "--image-size", "16")
	srv := s3servertest.Start(t)
	srv.Bucket(t, "train")
	srv.PutFiles(t, "train", "shards/", filepath.Join(data, "*.tar"))
	srv.Env(t, srv.Endpoint)
	dir := t.TempDir()
	args := func(data, ids string) []string {
		return []string{"run", "--data", data, "--shuffle", "all", "--batch", "16", "--passes", "2", "--emit-ids", ids}
	}
	_, stderr, code := execCLI(t, dir, args(filepath.Join(data, "*.tar"), "local.jsonl")...)
	require.Zero(t, code, stderr)
	_, stderr, code = execCLI(t, dir, args("s3://train/shards/*.tar", "refused.jsonl")...)
	require.NotZero(t, code)
	require.Contains(t, stderr, "s3://train/shards/")
	require.Contains(t, stderr, readers.ObjectCacheEnv)

	t.Setenv(readers.ObjectCacheEnv, t.TempDir())
	_, stderr, code = execCLI(t, dir, args("s3://train/shards/*.tar", "objects.jsonl")...)
	require.Zero(t, code, stderr)
	local, err := os.ReadFile(filepath.Join(dir, "local.jsonl"))
	require.NoError(t, err)
	objects, err := os.ReadFile(filepath.Join(dir, "objects.jsonl"))
	require.NoError(t, err)
	require.Equal(t, string(local), string(objects))
}

// The README's global-order block runs as written: over Debian's gzip'd
// Fashion-MNIST (through its decoded copy) and over gen's IDX pairs.
func TestREADMEGlobalOrderBlockRuns(t *testing.T) {
	testutil.FashionDir(t)
	out := runREADMEBlock(t, "the global order", func(b string) bool { return strings.Contains(b, "--shuffle auto") })
	require.Contains(t, out, "open_files(1 files) -> shuffle(all)")
	require.Contains(t, out, "120000 samples in 938 batches, 2 pass(es)")
	require.Contains(t, out, "wrote 100000 samples in 4 IDX pairs to out/idx")
	require.Contains(t, out, "200000 samples in 3126 batches, 2 pass(es)")
	require.Contains(t, out, "shuffle(all, or 4096)")
	require.Regexp(t, `shuffle: in a window of 4096 records, not the global order: out/rio/part-00000\.recordio is RecordIO`, out)
}
