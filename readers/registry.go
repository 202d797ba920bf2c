package readers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
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
	// Open opens the format's files (os.OpenFile when nil); a format of
	// one's own should open them with format.OpenFileWith(opts.Open, ...).
	Open format.Opener
	// Params are the entry's format parameters, "format(params):path"
	// (a TFRecord file's features); Open sets them from the entry.
	Params string
	// Objects reads s3:// URLs (objstore.Default, from the environment,
	// when nil).
	Objects *objstore.Store
	// ObjectCache is the object cache's directory, in place of
	// ACTORFEED_OBJECT_CACHE's ("": the environment's; docs/storage.md).
	ObjectCache string
	// ctx is OpenContext's: see Context.
	ctx context.Context
}

// Context is the context the reader is opened under (OpenContext; Open's
// is context.Background()): its open, and every read it makes of an
// object, end when the context does. A format of one's own that reads
// through something that can block for long should heed it too.
func (o OpenOptions) Context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// OpenFunc opens one file of a format as a Reader of instances.
type OpenFunc func(path string, opts OpenOptions) (Reader, error)

// Format describes a registered file format.
type Format struct {
	Name     string
	Suffixes []string // file name endings that select the format for a bare path
	Open     OpenFunc
	// Params checks an entry's parameters, "name(params):path", when the
	// format takes any; nil refuses them.
	Params func(params string) error
}

var registry = struct {
	sync.RWMutex
	byName map[string]Format
}{byName: map[string]Format{}}

// Register makes a format available to Open under name, which must be
// lower-case letters, digits, '_' or '-'. It panics if the name is taken or
// malformed, or if a suffix is already claimed by another format (a bare
// path must name one format), like database/sql.Register; call it from an
// init function.
func Register(f Format) {
	if !validFormatName(f.Name) || f.Open == nil {
		panic(fmt.Sprintf("readers: Register of malformed format %q", f.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byName[f.Name]; dup {
		panic(fmt.Sprintf("readers: Register called twice for format %q", f.Name))
	}
	for _, other := range registry.byName {
		for _, s := range f.Suffixes {
			if slices.Contains(other.Suffixes, strings.ToLower(s)) {
				panic(fmt.Sprintf("readers: Register of %q: suffix %q already names format %q", f.Name, s, other.Name))
			}
		}
	}
	for i, s := range f.Suffixes {
		f.Suffixes[i] = strings.ToLower(s)
	}
	registry.byName[f.Name] = f
}

// Formats lists the registered format names, sorted.
func Formats() []string {
	registry.RLock()
	defer registry.RUnlock()
	return namesLocked()
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

// ParseEntry splits a file list entry into its format and a path. An
// entry is "format:path", split on the first ':' (PaddlePaddle Fluid's name prefix
// rule), "format(params):path" for a format that takes parameters
// ("tfrecord(image=bytes,label=int64):train.tfrecord"), or a bare path
// whose suffix names the format. A prefix before ':' that could not be a
// format name (it holds '/', '.' or upper case) is taken as part of a bare
// path. format is the prefix as given, parameters too, so that
// format + ":" + another path is an entry of the same kind.
func ParseEntry(entry string) (format, path string, err error) {
	f, params, path, err := resolve(entry)
	if params != "" {
		return f.Name + "(" + params + ")", path, err
	}
	return f.Name, path, err
}

// resolve is ParseEntry returning the registered Format itself and the
// entry's parameters.
func resolve(entry string) (f Format, params, path string, err error) {
	if strings.TrimSpace(entry) == "" {
		return Format{}, "", "", fmt.Errorf("%w: empty entry", ErrBadEntry)
	}
	registry.RLock()
	defer registry.RUnlock()
	if f, params, path, ok, err := withParams(entry); ok {
		return f, params, path, err
	}
	f, path, err = resolvePlain(entry)
	return f, "", path, err
}

// withParams resolves "name(params):path" where name is a registered
// format; ok is false for any other entry. The caller holds the lock.
func withParams(entry string) (f Format, params, path string, ok bool, err error) {
	name, rest, found := strings.Cut(entry, "(")
	if !found || !validFormatName(name) {
		return Format{}, "", "", false, nil
	}
	if f, ok = registry.byName[name]; !ok {
		return Format{}, "", "", false, nil
	}
	params, path, found = strings.Cut(rest, "):")
	switch {
	case !found || path == "":
		err = fmt.Errorf("%w: %q: want %s(params):path", ErrBadEntry, entry, name)
	case f.Params == nil:
		err = fmt.Errorf("%w: %q: format %s takes no parameters", ErrBadEntry, entry, name)
	default:
		if perr := f.Params(params); perr != nil {
			err = fmt.Errorf("%w: %q: %w", ErrBadEntry, entry, perr)
		}
	}
	return f, params, path, true, err
}

// resolvePlain resolves "format:path" or a bare path; the caller holds the
// lock.
func resolvePlain(entry string) (Format, string, error) {
	if prefix, rest, ok := strings.Cut(entry, ":"); ok && validFormatName(prefix) && !objstore.IsURL(entry) {
		if rest == "" {
			return Format{}, "", fmt.Errorf("%w: %q names format %q but no path", ErrBadEntry, entry, prefix)
		}
		f, known := registry.byName[prefix]
		if !known {
			return Format{}, "", fmt.Errorf("%w %q in entry %q (known: %s)", ErrUnknownFormat, prefix, entry, knownLocked())
		}
		return f, rest, nil
	}
	// The longest matching suffix wins; Register keeps suffixes unique, so
	// the choice never depends on map order.
	base := strings.ToLower(filepath.Base(entry))
	var best Format
	bestLen := 0
	for _, f := range registry.byName {
		for _, s := range f.Suffixes {
			if strings.HasSuffix(base, s) && len(s) > bestLen {
				best, bestLen = f, len(s)
			}
		}
	}
	if bestLen == 0 {
		return Format{}, "", fmt.Errorf("%w: no format for %q: prefix it as format:path (known: %s)", ErrUnknownFormat, entry, knownLocked())
	}
	return best, entry, nil
}

// namesLocked lists the format names, sorted; the caller holds the lock.
func namesLocked() []string {
	names := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func knownLocked() string { return strings.Join(namesLocked(), ", ") }

// Open opens a file list entry (see ParseEntry) with its format's reader:
// OpenContext with context.Background().
func Open(entry string, opts OpenOptions) (Reader, error) {
	return OpenContext(context.Background(), entry, opts)
}

// OpenContext opens a file list entry (see ParseEntry) with its format's
// reader, under ctx: opening it (an object's look-up, a copy for the
// object cache) and every read of an object it makes end when ctx does,
// which a job stopped by a signal, or a reader's watchdog, needs. Reads
// of files are the kernel's, which ctx cannot end.
func OpenContext(ctx context.Context, entry string, opts OpenOptions) (Reader, error) {
	f, params, path, err := resolve(entry)
	if err != nil {
		return nil, err
	}
	opts.Params, opts.ctx = params, ctx
	r, err := f.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if len(opts.Slots) > 0 {
		r = Checked(r, opts.Slots)
	}
	return r, nil
}
