package main

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
)

// gzipShards writes n gzip'd WebDataset shards of JPEGs into a directory
// of their own, and returns its data entry.
func gzipShards(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	_, err := cli(t, "gen", "--to", "wds", "--out", dir, "--files", fmt.Sprint(n), "--samples", fmt.Sprint(10*n), "--image-size", "24")
	require.NoError(t, err)
	shards, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	require.NoError(t, err)
	for _, s := range shards {
		raw, err := os.ReadFile(s)
		require.NoError(t, err)
		f, err := os.Create(s + ".gz")
		require.NoError(t, err)
		zw := gzip.NewWriter(f)
		_, err = zw.Write(raw)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, f.Close())
		require.NoError(t, os.Remove(s))
	}
	return "wds:" + filepath.Join(dir, "*.tar.gz")
}

// A run whose decode cache is over its limit removes the copies another
// run left, and its summary says so; a limit set wrong is a bad command
// line, naming the variable.
func TestRunSaysWhatItEvicted(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	t.Setenv(readers.DecodeCacheBytesEnv, "40K") // a shard's copy is about 27 KB
	first, second := gzipShards(t, 2), gzipShards(t, 2)
	dir := t.TempDir()
	out, _, code := execCLI(t, dir, "run", "--data", first, "--shuffle", "all", "--batch", "5")
	require.Zero(t, code, out)
	out, _, code = execCLI(t, dir, "run", "--data", second, "--shuffle", "all", "--batch", "5")
	require.Zero(t, code, out)
	require.Contains(t, out, "20 samples in 4 batches")
	require.Regexp(t, `decode cache: evicted \d+ files, [0-9.]+ MB, to stay under ACTORFEED_DECODE_CACHE_BYTES=40K`, out)

	t.Setenv(readers.DecodeCacheBytesEnv, "40KB")
	_, stderr, code := execCLI(t, dir, "run", "--data", second)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `ACTORFEED_DECODE_CACHE_BYTES="40KB": want a size in bytes`)
}
