package readers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/actorfeed/actorfeed/readers/objstore"
)

// Expand resolves a file list as a user writes it (`run --data`, a
// program's file_names): braces first, as WebDataset's shard lists are
// written ("shard-{000000..000099}.tar", expanded as Python's braceexpand
// does), then glob patterns of files, or of objects (s3://bucket/pattern,
// listed within ctx), a pattern that matches nothing being an error.
// Plain paths are kept as given, and a file named twice (by overlapping
// patterns, or a pattern and a path) is listed once, where first named. A
// pattern without a format prefix whose path names no format ('data/*')
// leaves the format to each file it matches. An entry that cannot be
// expanded (bad braces or pattern) is an error wrapping ErrBadEntry.
//
// It heeds ctx between entries: a list of a million names stops when
// asked, not once it is all resolved.
func Expand(ctx context.Context, entries []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	// The working directory, looked up once: filepath.Abs looks it up
	// (two system calls) for every path.
	cwd, cwdErr := os.Getwd()
	add := func(entry, path string) {
		key := path
		switch {
		case objstore.IsURL(path):
		case filepath.IsAbs(path):
			key = filepath.Clean(path)
		case cwdErr == nil:
			key = filepath.Join(cwd, path)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, entry)
		}
	}
	for _, braced := range entries {
		each, err := expandBraces(braced)
		if err != nil {
			return nil, fmt.Errorf("%.120q: %w", braced, err) // an entry of up to 4 KiB: its start names it
		}
		for i, e := range each {
			if i%1024 == 0 && ctx.Err() != nil {
				return nil, fmt.Errorf("%.120q: %w", braced, context.Cause(ctx))
			}
			if err := expandEntry(ctx, e, add); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// expandEntry adds the files of entry e: itself, or its pattern's matches.
func expandEntry(ctx context.Context, e string, add func(entry, path string)) error {
	name, path, err := ParseEntry(e)
	if err != nil {
		if !strings.ContainsAny(e, "*?[") || strings.Contains(e, ":") {
			return fmt.Errorf("%q: %w", e, err)
		}
		name, path = "", e // each match names its own format
	}
	if !strings.ContainsAny(path, "*?[") {
		add(e, path)
		return nil
	}
	matches, err := glob(ctx, path)
	if err != nil {
		return fmt.Errorf("%q: %w", e, err)
	}
	if len(matches) == 0 {
		return fmt.Errorf("%q matches no file", e)
	}
	for _, m := range matches {
		entry := m
		if name != "" {
			entry = name + ":" + m
		} else if _, _, err := ParseEntry(m); err != nil {
			return fmt.Errorf("%q matches %s: %w", e, m, err)
		}
		add(entry, m)
	}
	return nil
}

// glob expands a pattern of files or of objects (s3://bucket/pattern). A
// malformed pattern is a malformed entry.
func glob(ctx context.Context, pattern string) ([]string, error) {
	if !objstore.IsURL(pattern) {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEntry, err)
		}
		return m, nil
	}
	s, err := objstore.Default(ctx)
	if err != nil {
		return nil, err
	}
	return s.Glob(ctx, pattern)
}
