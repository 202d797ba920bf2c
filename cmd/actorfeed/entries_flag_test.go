package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --data splits on commas outside a format's parameters and a shape's
// brackets.
func TestDataEntriesSplitOutsideParameters(t *testing.T) {
	var got []string
	v := entriesValue{&got}
	require.NoError(t, v.Set("tfrecord(a=bytes,b=float[2,2]):x.tfrecord,y.recordio"))
	require.NoError(t, v.Set("z.tar"))
	require.Equal(t, []string{"tfrecord(a=bytes,b=float[2,2]):x.tfrecord", "y.recordio", "z.tar"}, got)
}
