package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/supervisor"
)

func TestTrackerWindow(t *testing.T) {
	tr := supervisor.NewTracker(supervisor.Intensity{MaxRestarts: 2, Within: time.Second})
	t0 := time.Unix(1000, 0)
	require.True(t, tr.Allow(t0))
	require.True(t, tr.Allow(t0.Add(100*time.Millisecond)))
	require.False(t, tr.Allow(t0.Add(200*time.Millisecond)), "the third within the window")
	require.True(t, tr.Allow(t0.Add(1100*time.Millisecond)), "the first fell out of the window")
	require.Equal(t, 3, tr.Restarts())
}

type flaky struct{ transient bool }

func (f flaky) Error() string   { return "flaky" }
func (f flaky) Transient() bool { return f.transient }

func TestClassify(t *testing.T) {
	cases := map[messages.ErrorClass][]error{
		messages.ErrorClass_ERROR_CLASS_CORRUPT:   {format.ErrCorrupt, &format.Error{File: "a", Err: format.ErrCorrupt}},
		messages.ErrorClass_ERROR_CLASS_TRANSIENT: {syscall.EIO, fmt.Errorf("read: %w", syscall.EAGAIN), flaky{true}},
		messages.ErrorClass_ERROR_CLASS_FATAL:     {fs.ErrNotExist, errors.New("bad"), flaky{false}},
	}
	for want, errs := range cases {
		for _, err := range errs {
			require.Equal(t, want, supervisor.Classify(err), "%v", err)
		}
	}
}

func TestRetryStopsOnSuccessOrFatal(t *testing.T) {
	b := supervisor.Backoff{Initial: time.Microsecond, Max: time.Microsecond, Attempts: 5}
	calls := 0
	err := supervisor.Retry(t.Context(), b, func(int) error {
		calls++
		if calls < 3 {
			return syscall.EIO
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)

	calls = 0
	fatal := errors.New("fatal")
	require.ErrorIs(t, supervisor.Retry(t.Context(), b, func(int) error { calls++; return fatal }), fatal)
	require.Equal(t, 1, calls)

	calls = 0
	err = supervisor.Retry(t.Context(), b, func(int) error { calls++; return syscall.EIO })
	require.ErrorIs(t, err, supervisor.ErrRetriesExhausted)
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, 5, calls)
}

func TestRetryHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("stop")
	b := supervisor.Backoff{Initial: time.Hour, Max: time.Hour, Attempts: 3}
	err := supervisor.Retry(ctx, b, func(int) error { cancel(cause); return syscall.EIO })
	require.ErrorIs(t, err, cause)
}

func TestBackoffDelays(t *testing.T) {
	b := supervisor.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	var got []time.Duration
	for k := range 5 {
		got = append(got, b.Delay(k, nil))
	}
	require.Equal(t, []time.Duration{10, 20, 40, 50, 50}, scale(got, time.Millisecond))
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

func TestParseCorruptPolicy(t *testing.T) {
	p, err := supervisor.ParseCorruptPolicy("skip")
	require.NoError(t, err)
	require.Equal(t, supervisor.SkipCorrupt, p)
	_, err = supervisor.ParseCorruptPolicy("ignore")
	require.ErrorContains(t, err, "want fail or skip")
}
