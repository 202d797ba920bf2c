package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// versionedReader reads nothing, from one version of an object.
type versionedReader struct {
	readers.Reader
	version string
}

func (v versionedReader) Version() string { return v.version }
func (v versionedReader) Close() error    { return nil }

// A reader reopened on another version of an object than the order was
// built on (a restart after the object was replaced) is refused, naming
// the object; the same version opens.
func TestAReopenedObjectMustBeTheSameVersion(t *testing.T) {
	version := "\"a\""
	s, err := newFileSource([]string{"s3://bkt/x.recordio"}, func(context.Context, string) (readers.Reader, error) {
		return versionedReader{version: version}, nil
	})
	require.NoError(t, err)
	s.pin(0, "\"a\"")
	_, err = s.Open(t.Context(), 0, 0, 0)
	require.NoError(t, err)
	version = "\"b\""
	_, err = s.Open(t.Context(), 0, 0, 0)
	require.ErrorIs(t, err, objstore.ErrReplaced)
	require.ErrorContains(t, err, "s3://bkt/x.recordio")
}
