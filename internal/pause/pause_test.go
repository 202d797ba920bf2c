package pause

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}

func TestSleepWaitsItsDuration(t *testing.T) {
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
	require.NoError(t, Sleep(context.Background(), -time.Second))
}
