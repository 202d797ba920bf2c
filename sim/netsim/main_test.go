package netsim_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
)

// The network scenarios' nodes leave the goroutines of the remote's
// unclosed gRPC connections (service.RemoteLeaks), and others for a while
// (leakcheck); any other goroutine left fails.
func TestMain(m *testing.M) { goleak.VerifyTestMain(leakcheck.Settled(m), leakcheck.Options()...) }
