//go:build !race

package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A data service worker reads objects under its object roots with its own
// credentials, the batches the trainer would read itself; an object under
// no root is refused.
func TestServiceWorkersReadObjects(t *testing.T) {
	data := genSet(t, 3, 3000)
	srv, _ := serveSet(t, data)
	srv.PutFiles(t, "train", "other/", filepath.Join(data, "*.recordio"))
	dir := t.TempDir()
	args := []string{"run", "--data", "s3://train/set/*.recordio", "--batch", "32", "--devices", "2", "--seed", "9"}
	_, stderr, code := execCLI(t, dir, append(args, "--emit-ids", "local.jsonl")...)
	require.Zero(t, code, stderr)
	_, addr := startServe(t, dir, "s3://train/set")
	_, stderr, code = execCLI(t, dir, append(args, "--emit-ids", "service.jsonl", "--service", addr)...)
	require.Zero(t, code, stderr)
	require.Equal(t, sortedLines(t, filepath.Join(dir, "local.jsonl")), sortedLines(t, filepath.Join(dir, "service.jsonl")))

	_, stderr, code = execCLI(t, dir, "run", "--data", "s3://train/other/*.recordio", "--service", addr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "outside the worker's data roots")
}
