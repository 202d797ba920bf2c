package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A library that is not there, or that is not the CUDA driver, is no
// driver: the error says which, and nothing is bound.
func TestBindRefusesWhatIsNotTheDriver(t *testing.T) {
	_, err := bind("libcuda-not-here.so.1")
	require.ErrorIs(t, err, ErrNoDriver)
	require.ErrorContains(t, err, "libcuda-not-here.so.1")

	_, err = bind("libc.so.6") // loads, but has no cuInit
	require.ErrorIs(t, err, ErrNoDriver)
	require.ErrorContains(t, err, "libc.so.6 has no cuInit")
}

// The checksum the kernel computes, on the host: every byte, modulo 2^64.
func TestHostChecksum(t *testing.T) {
	require.Zero(t, HostChecksum(nil))
	require.Equal(t, uint64(1+2+255), HostChecksum([]byte{1, 2, 255}))
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 255
	}
	require.Equal(t, uint64(255<<20), HostChecksum(big))
}
