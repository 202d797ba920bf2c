package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// Errors a user can act on; each wraps the store's own error too.
var (
	ErrNoBucket = errors.New("no such bucket")
	ErrNoObject = errors.New("no such object")
	ErrDenied   = errors.New("access denied: check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and the bucket's permissions")
	ErrReplaced = errors.New("the object was replaced while it was read (its ETag changed): restart the job on the new version")
	ErrNoCreds  = errors.New("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
	// ErrUnreachable is a store no connection reaches (refused, no such
	// host); retryable, since a store that restarts answers again.
	ErrUnreachable = errors.New("the object store cannot be reached: check AWS_ENDPOINT_URL and that the store is up")
)

// Options tune a Store.
type Options struct {
	// Attempts bounds the tries of a request, and of reading a body on
	// from where it broke off (0: 5).
	Attempts int
	// Backoff is the most a first retry waits; each later one may wait
	// twice as long as the one before, up to 20 times Backoff (0: 100 ms).
	// Waits are drawn at random below that bound (full jitter).
	Backoff time.Duration
	// Stall bounds how long a connection may send nothing while an answer
	// is awaited or read: the request is then tried again, a body read on
	// from the byte it reached (0: 30 s).
	Stall time.Duration
	// MinRate is the slowest a body may arrive, in bytes a second: a
	// ranged GET of n bytes that has not delivered them within Stall +
	// n/MinRate is given up and read on from the byte it reached, as a
	// stalled one is. A body that trickles in a byte at a time never
	// stalls, and would hold a reader for days (0: 64 KiB/s).
	MinRate int64
	// MaxMatches and MaxListPages bound a Glob's listing (0: the
	// package's MaxMatches and MaxListPages).
	MaxMatches, MaxListPages int
	// Endpoint, AccessKey and SecretKey, when set, name a store and the
	// keys to it in place of the environment's (a simulation's server).
	Endpoint, AccessKey, SecretKey string
}

// Store reads objects through one client.
type Store struct {
	client *s3.Client
	opts   Options
	// requests and bytes count what was asked of the store, and read.
	requests, bytes atomic.Int64
}

// New makes a Store configured from the environment (package doc).
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 100 * time.Millisecond
	}
	if opts.Stall <= 0 {
		opts.Stall = 30 * time.Second
	}
	if opts.MinRate <= 0 {
		opts.MinRate = 64 << 10
	}
	if opts.MaxMatches <= 0 {
		opts.MaxMatches = MaxMatches
	}
	if opts.MaxListPages <= 0 {
		opts.MaxListPages = MaxListPages
	}
	s := &Store{opts: opts}
	load := []func(*config.LoadOptions) error{
		// The SDK's own log lines (an instance metadata service that is
		// not there, say) would break the one line an error is to the user.
		config.WithLogger(logging.Nop{}),
		// A server that stops sending would otherwise hold a reader, and
		// so the job, for good: the SDK's read timeout is reset by every
		// byte that arrives, so a slow answer is not cut off.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithReadTimeout(opts.Stall)),
	}
	if opts.AccessKey != "" {
		load = append(load, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, "")))
	}
	if opts.Endpoint != "" {
		load = append(load, config.WithBaseEndpoint(opts.Endpoint))
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(load, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = opts.Attempts
			o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
				return s.backoff(attempt), nil
			})
			// A job's many readers must not give up together because a
			// shared bucket of retry tokens ran dry under throttling.
			o.RateLimiter = ratelimit.None
		})
	}))...)
	if err != nil {
		return nil, fmt.Errorf("objstore: reading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // what local servers answer to; S3 redirects
	}
	s.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil
		// A range has no whole-object checksum to check: say nothing of it.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, boundBodies)
	})
	return s, nil
}

var shared struct {
	sync.Mutex
	env string // the AWS_ environment s was made in
	s   *Store
}

// Default is the process's Store, made by New with default Options when
// first asked for, and again when the AWS_ environment has changed since.
func Default(ctx context.Context) (*Store, error) {
	var env strings.Builder
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") {
			env.WriteString(kv + "\x00")
		}
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil || shared.env != env.String() {
		s, err := New(ctx, Options{})
		if err != nil {
			return nil, err
		}
		shared.s, shared.env = s, env.String()
	}
	return shared.s, nil
}

// Stats are the requests made of the store and the bytes read from it.
func (s *Store) Stats() (requests, bytes int64) { return s.requests.Load(), s.bytes.Load() }

// total counts what every store of the process asked and read, and what
// its objects' local copies served.
var total struct{ requests, bytes, copied atomic.Int64 }

// Totals are the requests made of every store of the process, and the
// bytes read from them.
func Totals() (requests, bytes int64) { return total.requests.Load(), total.bytes.Load() }

// CopiedTotal is the bytes the process read from local copies of objects
// (the object cache, readers.ObjectCacheEnv) rather than from their stores.
func CopiedTotal() int64 { return total.copied.Load() }

// asked counts a request.
func (s *Store) asked() {
	s.requests.Add(1)
	total.requests.Add(1)
}

// read counts n bytes read.
func (s *Store) read(n int) {
	s.bytes.Add(int64(n))
	total.bytes.Add(int64(n))
}

// bodyDeadline is how long a ranged GET of n bytes may take to deliver
// them all (Options.MinRate).
func (s *Store) bodyDeadline(n int) time.Duration {
	return s.opts.Stall + time.Duration(float64(n)/float64(s.opts.MinRate)*float64(time.Second))
}

// backoff is the wait before retry attempt (1 the first).
func (s *Store) backoff(attempt int) time.Duration {
	bound := min(s.opts.Backoff<<min(attempt-1, 20), 20*s.opts.Backoff)
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// describe makes err, from op on u, one line a user can act on.
func describe(u URL, err error) error {
	var api smithy.APIError
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	var re *awshttp.ResponseError
	status := 0
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var kind error
	switch {
	case strings.Contains(err.Error(), "get identity: "): // the SDK found no credentials; it has no error type for it
		kind = ErrNoCreds
	case code == "NoSuchBucket":
		kind = ErrNoBucket
	case code == "NoSuchKey":
		kind = ErrNoObject
	// Keys the server does not know: AWS says InvalidAccessKeyId (403),
	// Versity's gateway XAdminUserNotFound with a 404, before the status.
	case code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "XAdminUserNotFound":
		kind = ErrDenied
	case status == http.StatusNotFound:
		kind = ErrNoObject
	case status == http.StatusForbidden:
		kind = ErrDenied
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		kind = ErrReplaced
	case unreachable(err):
		return retryable{fmt.Errorf("%s: %w (%w)", u, ErrUnreachable, err)}
	default:
		var spent *retry.MaxAttemptsError
		if errors.As(err, &spent) {
			return retryable{fmt.Errorf("%s: %w", u, err)}
		}
		return fmt.Errorf("%s: %w", u, err)
	}
	return fmt.Errorf("%s: %w (%w)", u, kind, err)
}

// unreachable reports whether err is a connection that could not be
// made: no answer is an answer's error, and the SDK's words for it hide
// the cause in a chain.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}

// retryable is an error a later try may mend, once the store's own tries
// are spent: a reader's supervisor retries it (supervisor.Classify).
type retryable struct{ error }

func (r retryable) Transient() bool { return true }
func (r retryable) Unwrap() error   { return r.error }
