package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// dataRoots are a worker's data roots: the directories, symbolic links
// resolved, and an os.Root of each. Files are opened through the roots, so
// no path, and no symbolic link swapped in while a task runs, leads a
// worker outside them: a check of the path followed by an open of it would
// leave a window between the two.
//
// A root may be a prefix of objects, s3://bucket/prefix: the worker then
// reads objects under it (with its own credentials), and none elsewhere.
type dataRoots struct {
	paths   []string
	roots   []*os.Root
	objects []string // s3://bucket/prefix/ roots, each ending in a slash
}

func openDataRoots(dirs []string) (*dataRoots, error) {
	d := &dataRoots{}
	for _, dir := range dirs {
		if objstore.IsURL(dir) {
			u, err := objstore.ParseURL(dir)
			if err != nil {
				d.close()
				return nil, fmt.Errorf("service: data root %s: %w", dir, err)
			}
			if u.Key != "" && !strings.HasSuffix(u.Key, "/") {
				u.Key += "/"
			}
			d.objects = append(d.objects, u.String())
			continue
		}
		abs, err := filepath.Abs(dir)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		var root *os.Root
		if err == nil {
			root, err = os.OpenRoot(abs)
		}
		if err != nil {
			d.close()
			return nil, fmt.Errorf("service: data root %s: %w", dir, err)
		}
		d.paths, d.roots = append(d.paths, abs), append(d.roots, root)
	}
	return d, nil
}

func (d *dataRoots) close() {
	for _, r := range d.roots {
		r.Close()
	}
}

// under finds the root that holds path by its name: the root and path
// relative to it.
func (d *dataRoots) under(path string) (*os.Root, string, bool) {
	for i, root := range d.paths {
		if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return d.roots[i], rel, true
		}
	}
	return nil, "", false
}

// open opens path, an absolute path, through the root that holds it by
// name. A path that no root holds by name, or that a root will not follow
// (an absolute symbolic link, or one into another root), is opened through
// the root that holds what its links resolve to, if one does.
func (d *dataRoots) open(path string, flag int) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %s is not an absolute path", ErrOutsideRoots, path)
	}
	path = filepath.Clean(path)
	root, rel, ok := d.under(path)
	if ok {
		f, err := root.OpenFile(rel, flag, 0)
		if err == nil {
			return f, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, err) // the root's error names rel only
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	if root, rel, ok = d.under(real); !ok {
		return nil, d.outside(path)
	}
	f, err := root.OpenFile(rel, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// object says whether url names an object under an object root. A key
// with . or .. segments is refused: some servers resolve them as paths.
func (d *dataRoots) object(url string) error {
	u, err := objstore.ParseURL(url)
	if err != nil {
		return err
	}
	for _, seg := range strings.Split(u.Key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: %s has a %s segment", ErrOutsideRoots, url, seg)
		}
	}
	for _, root := range d.objects {
		if strings.HasPrefix(url, root) {
			return nil
		}
	}
	return d.outside(url)
}

// check says whether entry's file is under a root, symbolic links
// resolved, for a WorkerOptions.Open of the user's own, which opens the
// file by its path afterwards.
func (d *dataRoots) check(entry string) error {
	_, path, err := readers.ParseEntry(entry)
	if err != nil {
		return err
	}
	if objstore.IsURL(path) {
		return d.object(path)
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: %s is not an absolute path", ErrOutsideRoots, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("service: %s: %w", path, err)
	}
	if _, _, ok := d.under(real); !ok {
		return d.outside(path)
	}
	return nil
}

func (d *dataRoots) outside(path string) error {
	return fmt.Errorf("%w: %s (roots %s)", ErrOutsideRoots, path, strings.Join(append(slices.Clone(d.paths), d.objects...), ", "))
}
