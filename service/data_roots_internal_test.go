package service

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// tree writes two roots and a directory outside them, each with a file
// holding its name, and returns their paths, links resolved.
func tree(t *testing.T) (a, b, outside string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, d := range []string{"a", "b", "outside"} {
		dir := filepath.Join(base, d)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte(d), 0o644))
	}
	return filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "outside")
}

func read(t *testing.T, d *dataRoots, path string) (string, error) {
	t.Helper()
	f, err := d.open(path, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(data), nil
}

// Every open goes through an os.Root, which follows no link out of its
// root: a link swapped in between a check of the path and its open (the
// worker checked, then opened by path) is refused at the open itself.
func TestDataRootsOpenOnlyInsideTheRoots(t *testing.T) {
	a, b, outside := tree(t)
	d, err := openDataRoots([]string{a, b})
	require.NoError(t, err)
	defer d.close()
	link := func(name, target string) string {
		p := filepath.Join(a, name)
		require.NoError(t, os.Symlink(target, p))
		return p
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"a file under a root", filepath.Join(b, "sub", "f"), "b"},
		{"a relative link inside its root", link("rel", "sub/f"), "a"},
		{"an absolute link inside its root", link("abs", filepath.Join(a, "sub", "f")), "a"},
		{"a link into the other root", link("other", filepath.Join(b, "sub")) + "/f", "b"},
		{"dot-dots that stay inside", filepath.Join(a, "sub", "..", "sub", "f"), "a"},
	} {
		got, err := read(t, d, c.path)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	for _, c := range []struct{ name, path string }{
		{"a file outside", filepath.Join(outside, "sub", "f")},
		{"dot-dots that leave", filepath.Join(a, "..", "outside", "sub", "f")},
		{"a relative link out", link("relout", "../outside/sub/f")},
		{"an absolute link out", link("absout", filepath.Join(outside, "sub")) + "/f"},
	} {
		_, err := read(t, d, c.path)
		require.ErrorIs(t, err, ErrOutsideRoots, c.name)
	}
	_, err = read(t, d, "sub/f")
	require.ErrorIs(t, err, ErrOutsideRoots, "a relative path")
	missing := filepath.Join(a, "sub", "missing")
	_, err = read(t, d, missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "a missing file is not an outside one")
	require.NotErrorIs(t, err, ErrOutsideRoots)
	require.ErrorContains(t, err, missing, "the error names the whole path")
}

// An object root lets a worker read the objects under its prefix, and no
// others: not another prefix that starts alike, not another bucket, not a
// key that climbs out with dot-dots.
func TestObjectRootsHoldTheirPrefixOnly(t *testing.T) {
	d, err := openDataRoots([]string{"s3://train/set", "s3://whole"})
	require.NoError(t, err)
	defer d.close()
	for _, url := range []string{"s3://train/set/a.tar", "s3://train/set/sub/b.tar", "s3://whole/any/c.tar"} {
		require.NoError(t, d.object(url), url)
		require.NoError(t, d.check("wds:"+url), url)
	}
	for _, url := range []string{"s3://train/settle/a.tar", "s3://train/a.tar", "s3://other/set/a.tar",
		"s3://train/set/../secret/a.tar", "s3://train/set/./a.tar"} {
		require.ErrorIs(t, d.object(url), ErrOutsideRoots, url)
	}
	_, err = openDataRoots([]string{"s3:///nobucket"})
	require.Error(t, err)
}
