package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/actorfeed/actorfeed/readers/objstore"
)

// toObjects runs write on out, or, when out is an s3:// URL, on a local
// stand-in (a temporary directory, or a file in one when file is set) and
// then uploads what write made there: each object whole or not at all
// (objstore.Store.Upload). It returns what write was given.
func toObjects(ctx context.Context, out string, file bool, write func(local string) error) error {
	if !objstore.IsURL(out) {
		return write(out)
	}
	u, err := objstore.ParseURL(out)
	if err != nil {
		return usageError{fmt.Errorf("--out: %w", err)}
	}
	if file && (u.Key == "" || strings.HasSuffix(u.Key, "/")) {
		return usageError{fmt.Errorf("--out %s: name the object to write", out)}
	}
	s, err := objstore.Default(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "actorfeed-upload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if file {
		local := filepath.Join(dir, path.Base(u.Key))
		if err := write(local); err != nil {
			return err
		}
		return s.Upload(ctx, out, local)
	}
	if err := write(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if u.Key != "" && !strings.HasSuffix(u.Key, "/") {
		u.Key += "/"
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := s.Upload(ctx, u.String()+e.Name(), filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
