package leakcheck_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Find is quiet without leaks, and names a goroutine still blocked once
// the remote's settling time has passed.
func TestFindNamesWhatIsLeft(t *testing.T) {
	require.NoError(t, leakcheck.Find())

	block := make(chan struct{})
	go blockedOn(block)
	err := leakcheck.Find()
	close(block)
	require.ErrorContains(t, err, "leakcheck_test.blockedOn")
	require.ErrorContains(t, err, "after the nodes stopped")
}

func blockedOn(c chan struct{}) { <-c }
