package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --data splits on commas outside a format's parameters, a shape's
// brackets and braces.
func TestDataEntriesSplitOutsideParameters(t *testing.T) {
	var got []string
	v := entriesValue{&got}
	require.NoError(t, v.Set("tfrecord(a=bytes,b=float[2,2]):x.tfrecord,y.recordio"))
	require.NoError(t, v.Set("z.tar,s-{a,b}.tar"))
	require.Equal(t, []string{"tfrecord(a=bytes,b=float[2,2]):x.tfrecord", "y.recordio", "z.tar", "s-{a,b}.tar"}, got)
}
