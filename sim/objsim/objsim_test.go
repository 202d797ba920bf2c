package objsim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/sim/objsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Drawn scenarios read from objects through their faults the batches they
// read from disk; a store that fails or stalls every request fails the
// scenario rather than passing it or hanging.
func TestScenariosReadAsFromDisk(t *testing.T) {
	s3servertest.Binary(t) // skips, or fails under CI, without the gateway
	e, err := objsim.Start(t.Context())
	require.NoError(t, err)
	defer e.Close()
	for seed := range uint64(4) {
		sc := objsim.Generate(seed)
		res := objsim.Run(t.Context(), e, sc)
		require.True(t, res.Passed(), "%s: %v", sc.Describe(), res.Violations)
		require.Positive(t, res.Requests)
	}
	// The object cache's fetches go through the faults; the second pass
	// reads the copies.
	sc := objsim.Generate(5)
	sc.Cached, sc.Passes = true, 2
	res := objsim.Run(t.Context(), e, sc)
	require.True(t, res.Passed(), "%s: %v", sc.Describe(), res.Violations)

	sc = objsim.Generate(9)
	sc.Throttle, sc.Errors, sc.Cuts = 1, 0, 0
	for _, cached := range []bool{false, true} {
		sc.Cached = cached
		res = objsim.Run(t.Context(), e, sc)
		require.False(t, res.Passed(), "every request throttled, cache %v", cached)
	}
	sc.Throttle, sc.Stalls, sc.StallAt = 0, 1, 0
	res = objsim.Run(t.Context(), e, sc)
	require.False(t, res.Passed(), "every request stalled")
}

// The hostile stores: an endless body reads as from disk; a trickling
// body, a listing that loops and one that never ends each fail the job
// with an error naming the object or prefix, within the deadline, with
// nothing delivered twice.
func TestHostileStores(t *testing.T) {
	s3servertest.Binary(t)
	e, err := objsim.Start(t.Context())
	require.NoError(t, err)
	defer e.Close()
	for _, sc := range objsim.Hostiles() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		res := objsim.Run(ctx, e, sc)
		cancel()
		require.True(t, res.Passed(), "%s: %v", sc.Describe(), res.Violations)
		t.Logf("%s: %d requests, %v", sc.Hostile, res.Requests, res.Duration.Round(time.Millisecond))
	}
}
