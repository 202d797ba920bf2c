package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/wds"
)

// imageExtensions are the files torchvision's ImageFolder takes as images
// (IMG_EXTENSIONS), matched without regard to case.
var imageExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// folderImage is one image of an image folder and its class's index.
type folderImage struct {
	path  string
	class int
}

// imageFolder lists root as torchvision's ImageFolder does: the classes
// are its subdirectories, sorted by name, each the index of its place;
// the images are each class's image files, found by walking its
// directory (links followed) and taking the directories in the order of
// their paths and each one's files by name.
func imageFolder(root string) (classes []string, images []folderImage, err error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if info, err := os.Stat(filepath.Join(root, e.Name())); err == nil && info.IsDir() {
			classes = append(classes, e.Name())
		}
	}
	slices.Sort(classes)
	if len(classes) == 0 {
		return nil, nil, fmt.Errorf("%s: no class directories: an image folder holds a directory of images a class, as torchvision's ImageFolder reads", root)
	}
	for i, c := range classes {
		files, err := classImages(filepath.Join(root, c))
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			images = append(images, folderImage{f, i})
		}
	}
	if len(images) == 0 {
		return nil, nil, fmt.Errorf("%s: no images (%s) in its class directories", root, strings.Join(imageExtensions, " "))
	}
	return classes, images, nil
}

// classImages are the image files under dir in ImageFolder's order:
// sorted(os.walk(dir)), then each directory's files sorted.
func classImages(dir string) ([]string, error) {
	byDir := map[string][]string{}
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		if depth > 64 {
			return fmt.Errorf("%s: directories nested more than 64 deep (a link to a parent?)", d)
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		byDir[d] = nil
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			info, err := os.Stat(p) // links followed, as os.walk(followlinks=True)
			if err != nil {
				continue
			}
			if info.IsDir() {
				if err := walk(p, depth+1); err != nil {
					return err
				}
			} else if info.Mode().IsRegular() && slices.Contains(imageExtensions, strings.ToLower(filepath.Ext(p))) {
				byDir[d] = append(byDir[d], p)
			}
		}
		return nil
	}
	if err := walk(dir, 0); err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	var out []string
	for _, d := range dirs {
		files := byDir[d]
		slices.Sort(files)
		out = append(out, files...)
	}
	return out, nil
}

// folderExt is the member name the images of a WebDataset shard take:
// their extension, which every image must share (a shard's samples have
// the same fields), .jpeg written as jpg.
func folderExt(images []folderImage) (string, error) {
	first := imageExt(images[0].path)
	for _, im := range images {
		if e := imageExt(im.path); e != first {
			return "", fmt.Errorf("%s is .%s and %s .%s: the samples of a WebDataset shard share their fields, so convert one format to the other first",
				images[0].path, first, im.path, e)
		}
	}
	return first, nil
}

// imageExt is an image file's extension as a WebDataset field names it.
func imageExt(path string) string {
	switch e := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); e {
	case "jpeg":
		return "jpg"
	case "tif":
		return "tiff"
	default:
		return e
	}
}

// convertFolder writes the image folder root as shards in out: sample i
// is image i of imageFolder's order, its file's bytes as they are and
// its class's index, and classes.json lists the classes.
func convertFolder(ctx context.Context, root, out string, perShard int, to string) (samples, shards int, err error) {
	classes, images, err := imageFolder(root)
	if err != nil {
		return 0, 0, err
	}
	sf := shardFormats[to]
	newShard := sf.new
	if to == "wds" {
		ext, err := folderExt(images)
		if err != nil {
			return 0, 0, err
		}
		newShard = func() shardWriter { return &tarShard{ext: "." + ext} }
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, 0, err
	}
	shard := newShard()
	for i, im := range images {
		if err := context.Cause(ctx); err != nil {
			return samples, shards, err
		}
		data, err := readImage(im.path)
		if err != nil {
			return samples, shards, err
		}
		if err := shard.add(i, data, int64(im.class), true); err != nil {
			return samples, shards, fmt.Errorf("%s: %w", im.path, err)
		}
		if samples++; samples%perShard == 0 || samples == len(images) {
			if err := shard.write(filepath.Join(out, fmt.Sprintf("shard-%06d%s", shards, sf.suffix))); err != nil {
				return samples, shards, err
			}
			shards++
		}
	}
	return samples, shards, writeClasses(filepath.Join(out, "classes.json"), classes)
}

// readImage reads an image file whole, refusing one larger than a shard's
// member may be before reading it.
func readImage(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > wds.MaxMemberBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than a shard's member may hold (%d)", path, st.Size(), wds.MaxMemberBytes)
	}
	return io.ReadAll(io.LimitReader(f, wds.MaxMemberBytes))
}

// writeClasses writes the classes, by index, as ImageFolder's classes.
func writeClasses(path string, classes []string) error {
	b, err := json.Marshal(map[string]any{"classes": classes})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}
