package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The data service's processes get a heap floor, unless the user set
// GOGC: then theirs stands.
func TestServiceProcessesGetAHeapFloorUnlessGOGCIsSet(t *testing.T) {
	defer func(old []byte) { heapFloor = old }(heapFloor)
	heapFloor = nil
	t.Setenv("GOGC", "150")
	raiseHeapFloor()
	require.Nil(t, heapFloor, "GOGC set: left alone")
	require.Contains(t, heapFloorNote(), "no heap floor")
	require.NoError(t, os.Unsetenv("GOGC")) // t.Setenv restores it
	raiseHeapFloor()
	require.Len(t, heapFloor, heapFloorBytes)
	require.Contains(t, heapFloorNote(), "a heap floor of 64 MiB")
}
