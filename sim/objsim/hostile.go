package objsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// hostile runs sc's hostile store against the job over urls (the objects
// of bucket), whose batches from disk are want, and says what went wrong.
func (e *Env) hostile(ctx context.Context, sc Scenario, bucket string, urls []string, want [][][]uint64) []string {
	// A store of its own that gives up sooner than the drawn scenarios'
	// (which must ride out their faults): a trickle is a failure, so
	// its scenario lasts as long as the store's tries take.
	store, err := objstore.New(ctx, objstore.Options{Endpoint: e.proxy.URL, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey,
		Attempts: 3, Backoff: time.Millisecond, Stall: 100 * time.Millisecond, MinRate: minRate, MaxMatches: maxMatches, MaxListPages: maxListPages})
	if err != nil {
		return []string{err.Error()}
	}
	switch sc.Hostile {
	case RepeatToken, EndlessListing:
		fault := s3server.Fault{RepeatToken: sc.Hostile == RepeatToken, EndlessListing: sc.Hostile == EndlessListing}
		e.proxy.SetFaults(func(_ int, r *http.Request) s3server.Fault { return fault })
		_, err = store.Glob(ctx, fmt.Sprintf("s3://%s/*", bucket))
		return expectError(ctx, err, objstore.ErrListing, fmt.Sprintf("s3://%s/", bucket))
	}
	fault := s3server.Fault{Endless: sc.Hostile == EndlessBody}
	if sc.Hostile == TrickleBody {
		fault = s3server.Fault{Trickle: trickle}
	}
	e.proxy.SetFaults(func(_ int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodGet {
			return fault
		}
		return s3server.Fault{}
	})
	got, err := passes(ctx, sc, urls, readers.OpenOptions{Objects: store})
	if sc.Hostile == EndlessBody {
		if err != nil {
			return []string{fmt.Sprintf("an endless body failed the run: %v", err)}
		}
		return compare(want, got)
	}
	out := expectError(ctx, err, nil, fmt.Sprintf("s3://%s/", bucket), "slower than")
	return append(out, noneTwice(got)...)
}

// expectError says what is wrong with err, the error a hostile store must
// end the job with: it must be one, before the scenario's deadline,
// wrapping is (when set) and saying each of says.
func expectError(ctx context.Context, err, is error, says ...string) []string {
	switch {
	case err == nil:
		return []string{"the job succeeded against a hostile store"}
	case ctx.Err() != nil:
		return []string{fmt.Sprintf("no error within the scenario's deadline: %v", err)}
	case is != nil && !errors.Is(err, is):
		return []string{fmt.Sprintf("the error does not wrap %q: %v", is, err)}
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			return []string{fmt.Sprintf("the error does not say %q: %v", s, err)}
		}
	}
	return nil
}

// noneTwice says which samples the batches got hand out twice in a pass.
func noneTwice(got [][][]uint64) []string {
	var out []string
	for p, pass := range got {
		seen := map[uint64]bool{}
		for _, b := range pass {
			for _, id := range b {
				if seen[id] {
					out = append(out, fmt.Sprintf("pass %d: sample %x twice", p, id))
				}
				seen[id] = true
			}
		}
	}
	return out
}
