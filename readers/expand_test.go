package readers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
)

// Braces expand before globs, a file named twice is listed once where it
// was first named, a format prefix goes with each match, and what cannot
// be expanded is a malformed entry while a pattern matching nothing is
// not.
func TestExpandListsEachFileOnce(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	for _, name := range []string{"a-0.tar", "a-1.tar", "a-2.tar", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	at := func(names ...string) []string {
		for i, n := range names {
			names[i] = filepath.Join(dir, n)
		}
		return names
	}
	got, err := readers.Expand(ctx, at("a-{1,0}.tar", "a-*.tar"))
	require.NoError(t, err)
	require.Equal(t, append(at("a-1.tar", "a-0.tar"), "wds:"+filepath.Join(dir, "a-2.tar")), got, "a pattern's format, by its suffix, goes with its matches")
	got, err = readers.Expand(ctx, []string{"wds:" + filepath.Join(dir, "a-{0..1}*")})
	require.NoError(t, err)
	require.Equal(t, []string{"wds:" + filepath.Join(dir, "a-0.tar"), "wds:" + filepath.Join(dir, "a-1.tar")}, got)
	got, err = readers.Expand(ctx, at("missing.recordio"))
	require.NoError(t, err, "a plain path is kept as given: opening it says what is wrong")
	require.Equal(t, at("missing.recordio"), got)

	for _, bad := range []string{"a-{0..2.tar", "a-[.tar"} {
		_, err := readers.Expand(ctx, at(bad))
		require.ErrorIs(t, err, readers.ErrBadEntry, bad)
		require.ErrorContains(t, err, bad)
	}
	_, err = readers.Expand(ctx, at("b-*.tar"))
	require.ErrorContains(t, err, "matches no file")
	require.NotErrorIs(t, err, readers.ErrBadEntry)
	_, err = readers.Expand(ctx, at("*"))
	require.ErrorContains(t, err, "matches "+filepath.Join(dir, "notes.txt"))
}

// A list of a million names stops as soon as its context ends, not once
// every name is resolved: a SIGTERM during the expansion of
// "x-{000000..999999}.tar" was ignored.
func TestExpandStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped")
	cancel(stop)
	_, err := readers.Expand(ctx, []string{"x-{000000..999999}.tar"})
	require.ErrorIs(t, err, stop)
	require.ErrorContains(t, err, "x-{000000..999999}.tar")
}
