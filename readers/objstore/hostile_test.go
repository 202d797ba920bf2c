package objstore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// A body that goes on past its range for ever is read a little past its
// end and closed: the read gets its bytes; a listing's page that goes on
// is read to a bound. Before, the rest was drained to keep the
// connection, for ever, at 70% of a core.
func TestAnEndlessBodyIsNotReadForEver(t *testing.T) {
	data := random(300_000)
	_, p, s := setup(t, data)
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		return s3server.Fault{Endless: r.Method == http.MethodGet}
	})
	readWhole(t, s, data)
	// A listing's page too: the SDK drains a page's body once parsed.
	got, err := s.Glob(t.Context(), "s3://bkt/*")
	require.NoError(t, err)
	require.Equal(t, []string{"s3://bkt/data"}, got)
}

// A body that trickles in (a byte every 2 ms) never stalls, yet does not
// hold a read for long: past Stall + its bytes at MinRate it is given up
// and read on from the byte it reached, and once it trickles every time,
// the read fails naming the object, the byte and the rate, for a reader's
// supervisor to try again.
func TestATricklingBodyIsGivenUp(t *testing.T) {
	data := random(20_000)
	_, p, s := setupWith(t, data, objstore.Options{Backoff: time.Millisecond, Stall: 100 * time.Millisecond, MinRate: 1 << 20})
	gets := 0
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodGet {
			if gets++; gets <= 2 {
				return s3server.Fault{Trickle: 2 * time.Millisecond}
			}
		}
		return s3server.Fault{}
	})
	readWhole(t, s, data)
	require.Equal(t, 3, gets, "two trickling bodies given up, the third read whole")

	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		return s3server.Fault{Trickle: 2 * time.Millisecond}
	})
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	_, err = o.ReadAt(make([]byte, len(data)), 0)
	require.ErrorContains(t, err, "s3://bkt/data at byte")
	require.ErrorContains(t, err, "slower than 1048576 bytes a second")
	require.True(t, transient(err))
}

// The object's reads end with the context it was opened under (a job
// stopped by a signal, a reader's watchdog), not only at Close: a stalled
// body no longer holds a stopped job.
func TestReadsEndWithTheOpenersContext(t *testing.T) {
	data := random(100_000)
	_, p, s := setupWith(t, data, objstore.Options{Backoff: time.Millisecond, Stall: time.Hour})
	got := make(chan struct{})
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodGet {
			close(got)
			return s3server.Fault{Stall: 10}
		}
		return s3server.Fault{}
	})
	ctx, cancel := context.WithCancelCause(t.Context())
	o, err := s.Open(ctx, "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	stop := errors.New("stopped by SIGTERM")
	go func() {
		<-got
		cancel(stop)
	}()
	_, err = o.ReadAt(make([]byte, len(data)), 0)
	require.ErrorIs(t, err, stop)
	require.ErrorContains(t, err, "s3://bkt/data")
}

// A listing that loops (the same continuation token again), one that
// never ends, and one past the bounds are errors wrapping ErrListing and
// naming the prefix, never a growth without end. A looping listing
// exhausted memory in under a minute.
func TestAListingThatLoopsOrNeverEndsIsRefused(t *testing.T) {
	srv, p, _ := setup(t, nil)
	for i := range 3 {
		srv.Put(t, "bkt", "set/shard-"+string(rune('a'+i))+".tar", nil)
	}
	s, err := objstore.New(t.Context(), objstore.Options{Backoff: time.Millisecond, MaxMatches: 5000, MaxListPages: 50})
	require.NoError(t, err)

	p.SetFaults(func(n int, r *http.Request) s3server.Fault { return s3server.Fault{RepeatToken: true} })
	_, err = s.Glob(t.Context(), "s3://bkt/set/*.tar")
	require.ErrorIs(t, err, objstore.ErrListing)
	require.ErrorContains(t, err, "listing s3://bkt/set/")
	require.ErrorContains(t, err, "twice (page 2): its listing loops")

	p.SetFaults(func(n int, r *http.Request) s3server.Fault { return s3server.Fault{EndlessListing: true} })
	_, err = s.Glob(t.Context(), "s3://bkt/set/*.tar")
	require.ErrorIs(t, err, objstore.ErrListing)
	require.ErrorContains(t, err, "s3://bkt/set/*.tar")
	require.ErrorContains(t, err, "matches more than 5000 objects")
	_, err = s.Glob(t.Context(), "s3://bkt/set/*.json") // none matches: the pages run out first
	require.ErrorIs(t, err, objstore.ErrListing)
	require.ErrorContains(t, err, "listing s3://bkt/set/")
	require.ErrorContains(t, err, "more than 50 pages")
	require.True(t, strings.Contains(err.Error(), "narrower pattern"))
}
