package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// An image folder that cannot be shards is refused naming why: no class
// directories, images of two formats for a WebDataset shard's one field,
// RecordIO asked for.
func TestConvertRefusesFoldersItCannotShard(t *testing.T) {
	empty := t.TempDir()
	_, err := cli(t, "convert", empty, "--to", "wds", "--out", t.TempDir())
	require.ErrorContains(t, err, "no class directories")

	mixed := t.TempDir()
	for _, p := range []string{"cat/a.jpg", "dog/b.png"} {
		require.NoError(t, os.MkdirAll(filepath.Join(mixed, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mixed, p), []byte("x"), 0o644))
	}
	out := t.TempDir()
	_, err = cli(t, "convert", mixed, "--to", "wds", "--out", out)
	require.ErrorContains(t, err, "a.jpg is .jpg and")
	require.ErrorContains(t, err, "b.png .png")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written")
	_, err = cli(t, "convert", mixed, "--to", "tfrecord", "--out", out) // TFRecord's image feature takes either
	require.NoError(t, err)
	_, err = cli(t, "convert", mixed, "--out", filepath.Join(out, "x.recordio"))
	require.ErrorContains(t, err, "is an image folder: convert it --to wds or --to tfrecord")
}
