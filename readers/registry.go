package readers

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Errors of the format registry.
var (
	// ErrUnknownFormat is returned by Open for a format name no one
	// registered, or a bare path whose suffix names no format.
	ErrUnknownFormat = errors.New("readers: unknown format")
	// ErrBadEntry is returned by ParseEntry for a malformed file list entry.
	ErrBadEntry = errors.New("readers: malformed file entry")
)

// OpenOptions are passed to a format's opener.
type OpenOptions struct {
	// Slots, when not empty, declares the reader's output: every item is
	// verified with CheckSlots and a mismatch is an error naming the slot.
	Slots []SlotSpec
}

// OpenFunc opens one file of a format as a Reader of instances.
type OpenFunc func(path string, opts OpenOptions) (Reader, error)

// Format describes a registered file format.
type Format struct {
	Name     string
	Suffixes []string // file name endings that select the format for a bare path
	Open     OpenFunc
}

var registry = struct {
	sync.RWMutex
	byName map[string]Format
}{byName: map[string]Format{}}

// Register makes a format available to Open under name, which must be
// lower-case letters, digits, '_' or '-'. It panics if the name is taken or
// malformed, like database/sql.Register; call it from an init function.
func Register(f Format) {
	if !validFormatName(f.Name) || f.Open == nil {
		panic(fmt.Sprintf("readers: Register of malformed format %q", f.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byName[f.Name]; dup {
		panic(fmt.Sprintf("readers: Register called twice for format %q", f.Name))
	}
	registry.byName[f.Name] = f
}

// Formats lists the registered format names, sorted.
func Formats() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func validFormatName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseEntry splits a file list entry into a format name and a path. An
// entry is "format:path", split on the first ':' (the seeds' name prefix
// rule), or a bare path whose suffix names the format. A prefix before ':'
// that could not be a format name (it holds '/', '.' or upper case) is taken
// as part of a bare path.
func ParseEntry(entry string) (formatName, path string, err error) {
	if strings.TrimSpace(entry) == "" {
		return "", "", fmt.Errorf("%w: empty entry", ErrBadEntry)
	}
	if prefix, rest, ok := strings.Cut(entry, ":"); ok && validFormatName(prefix) {
		if rest == "" {
			return "", "", fmt.Errorf("%w: %q names format %q but no path", ErrBadEntry, entry, prefix)
		}
		if _, known := lookup(prefix); !known {
			return "", "", fmt.Errorf("%w %q in entry %q (known: %s)", ErrUnknownFormat, prefix, entry, strings.Join(Formats(), ", "))
		}
		return prefix, rest, nil
	}
	name, ok := formatBySuffix(entry)
	if !ok {
		return "", "", fmt.Errorf("%w: no format for %q: prefix it as format:path (known: %s)", ErrUnknownFormat, entry, strings.Join(Formats(), ", "))
	}
	return name, entry, nil
}

func lookup(name string) (Format, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.byName[name]
	return f, ok
}

// formatBySuffix picks the format with the longest suffix matching path.
func formatBySuffix(path string) (string, bool) {
	registry.RLock()
	defer registry.RUnlock()
	base := strings.ToLower(filepath.Base(path))
	best, bestLen := "", 0
	for name, f := range registry.byName {
		for _, s := range f.Suffixes {
			if strings.HasSuffix(base, s) && len(s) > bestLen {
				best, bestLen = name, len(s)
			}
		}
	}
	return best, bestLen > 0
}

// Open opens a file list entry (see ParseEntry) with its format's reader.
func Open(entry string, opts OpenOptions) (Reader, error) {
	name, path, err := ParseEntry(entry)
	if err != nil {
		return nil, err
	}
	f, _ := lookup(name)
	r, err := f.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if len(opts.Slots) > 0 {
		r = Checked(r, opts.Slots)
	}
	return r, nil
}
