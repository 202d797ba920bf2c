package sim_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
)

// Pipelines leave goroutines that end a little after Close (leakcheck);
// any other goroutine left fails.
func TestMain(m *testing.M) { goleak.VerifyTestMain(leakcheck.Settled(m), leakcheck.Options()...) }
