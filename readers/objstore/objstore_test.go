package objstore_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts a server with one object, data, at s3://bkt/data, and a
// proxy before it; the store reads through the proxy.
func setup(t *testing.T, data []byte) (*s3servertest.Server, *s3server.Proxy, *objstore.Store) {
	return setupWith(t, data, objstore.Options{Backoff: time.Millisecond})
}

func setupWith(t *testing.T, data []byte, opts objstore.Options) (*s3servertest.Server, *s3server.Proxy, *objstore.Store) {
	srv := s3servertest.Start(t)
	srv.Bucket(t, "bkt")
	srv.Put(t, "bkt", "data", data)
	p := s3servertest.NewProxy(t, srv)
	srv.Env(t, p.URL)
	s, err := objstore.New(t.Context(), opts)
	require.NoError(t, err)
	return srv, p, s
}

func random(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// An object reads by ranges as the bytes it holds, to its end.
func TestReadsByRanges(t *testing.T) {
	data := random(1 << 20)
	_, _, s := setup(t, data)
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	require.EqualValues(t, len(data), o.Size())
	require.NotEmpty(t, o.ETag())
	for _, at := range []int64{0, 1, 4095, 700_000, int64(len(data)) - 10} {
		p := make([]byte, 4096)
		n, err := o.ReadAt(p, at)
		want := data[at:min(int(at)+4096, len(data))]
		require.Equal(t, len(want), n)
		require.Equal(t, want, p[:n])
		if n < len(p) {
			require.ErrorIs(t, err, io.EOF)
		} else {
			require.NoError(t, err)
		}
	}
	all, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	require.NoError(t, err)
	require.Equal(t, data, all)
	requests, bytes := s.Stats()
	require.Positive(t, requests)
	require.GreaterOrEqual(t, bytes, int64(len(data)))
}

// A body cut off mid-object is read on from the byte it reached; an
// answer of throttling or of a server error is asked again.
func TestReadsGoOnThroughFaults(t *testing.T) {
	data := random(300_000)
	_, p, s := setup(t, data)
	gets := 0
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method != http.MethodGet {
			return s3server.Fault{}
		}
		gets++
		switch gets {
		case 1, 2:
			return s3server.Fault{Status: http.StatusServiceUnavailable}
		case 3:
			return s3server.Fault{Status: http.StatusInternalServerError}
		case 4, 5, 6:
			return s3server.Fault{Cut: 50_000}
		}
		return s3server.Fault{}
	})
	readWhole(t, s, data)
	require.Equal(t, 7, gets, "3 answers retried, then 3 cut bodies read on, then the rest")
	_, read := s.Stats()
	require.Less(t, read, int64(len(data))+10_000, "what was read is not read again")
}

// Keys may come from the shared credentials file, by profile, and the
// session's token with them; a profile that is not there is an error
// naming the object.
func TestCredentialsFromTheSharedFile(t *testing.T) {
	data := random(1000)
	setup(t, data)
	file := filepath.Join(t.TempDir(), "credentials")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[train]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		s3server.AccessKey, s3server.SecretKey)), 0o600))
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	t.Setenv("AWS_PROFILE", "train")
	s, err := objstore.New(t.Context(), objstore.Options{})
	require.NoError(t, err)
	readWhole(t, s, data)

	t.Setenv("AWS_PROFILE", "")
	s, err = objstore.New(t.Context(), objstore.Options{})
	require.NoError(t, err)
	_, err = s.Open(t.Context(), "s3://bkt/data")
	require.ErrorIs(t, err, objstore.ErrDenied, "the default profile's keys are not the server's")

	t.Setenv("AWS_PROFILE", "absent")
	_, err = objstore.New(t.Context(), objstore.Options{})
	require.ErrorContains(t, err, "absent")
}

// readWhole reads s3://bkt/data in one ReadAt, and requires data.
func readWhole(t *testing.T, s *objstore.Store, data []byte) {
	t.Helper()
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	got := make([]byte, len(data))
	n, err := o.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(data), n)
	require.Equal(t, data, got)
}

// A server that stops answering, or stops sending a body, or drops the
// connection, holds no read for good: the request is tried again, a body
// read on from the byte it reached.
func TestStallsAndDropsAreTriedAgain(t *testing.T) {
	data := random(300_000)
	_, p, s := setupWith(t, data, objstore.Options{Backoff: time.Millisecond, Stall: 200 * time.Millisecond})
	heads, gets := 0, 0
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		switch r.Method {
		case http.MethodHead:
			if heads++; heads == 1 {
				return s3server.Fault{Delay: time.Hour}
			}
		case http.MethodGet:
			switch gets++; gets {
			case 1:
				return s3server.Fault{Drop: true}
			case 2:
				return s3server.Fault{Delay: time.Hour}
			case 3:
				return s3server.Fault{Stall: 50_000}
			case 4:
				return s3server.Fault{Delay: 10 * time.Millisecond, Stall: 120_000}
			}
		}
		return s3server.Fault{}
	})
	readWhole(t, s, data)
	require.Equal(t, 2, heads, "a HEAD with no answer asked again")
	require.Equal(t, 5, gets, "a dropped and an unanswered GET asked again, two stalled bodies read on")
	_, read := s.Stats()
	require.Less(t, read, int64(len(data))+10_000, "what was read is not read again")
}

// A body cut off more often than Attempts is an error naming the object
// and the byte it reached.
func TestAttemptsAreBounded(t *testing.T) {
	_, p, s := setup(t, random(100_000))
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodGet {
			return s3server.Fault{Cut: 1000}
		}
		return s3server.Fault{}
	})
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	_, err = o.ReadAt(make([]byte, 100_000), 0)
	require.ErrorContains(t, err, "s3://bkt/data at byte 5000")
	require.True(t, transient(err), "a reader's supervisor may try again")

	p.SetFaults(func(int, *http.Request) s3server.Fault { return s3server.Fault{Status: http.StatusServiceUnavailable} })
	before := p.Requests()
	_, err = s.Open(t.Context(), "s3://bkt/data")
	require.ErrorContains(t, err, "s3://bkt/data")
	require.True(t, transient(err))
	require.Equal(t, 5, p.Requests()-before, "Attempts tries")
}

func transient(err error) bool {
	var tr interface{ Transient() bool }
	return errors.As(err, &tr) && tr.Transient()
}

// An object replaced after it was opened is an error naming it, never a
// read of the new version.
func TestAReplacedObjectIsAnError(t *testing.T) {
	srv, _, s := setup(t, random(10_000))
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	_, err = o.ReadAt(make([]byte, 100), 0)
	require.NoError(t, err)
	srv.Put(t, "bkt", "data", random(10_001))
	_, err = o.ReadAt(make([]byte, 100), 0)
	require.ErrorIs(t, err, objstore.ErrReplaced)
	require.ErrorContains(t, err, "s3://bkt/data")
}

// What retrying cannot mend fails on the first answer: one line naming
// the URL and the cause.
func TestErrorsRetryingCannotMend(t *testing.T) {
	_, p, s := setup(t, random(10))
	for url, want := range map[string]error{"s3://bkt/nothing": objstore.ErrNoObject, "s3://nobucket/x": objstore.ErrNoBucket} {
		before := p.Requests()
		_, err := s.Open(t.Context(), url)
		require.ErrorIs(t, err, want, url)
		require.ErrorContains(t, err, url)
		require.NotContains(t, err.Error(), "\n")
		require.LessOrEqual(t, p.Requests()-before, 2, "%s: not retried", url)
		require.False(t, transient(err), url)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad, err := objstore.New(t.Context(), objstore.Options{})
	require.NoError(t, err)
	before := p.Requests()
	_, err = bad.Open(t.Context(), "s3://bkt/data")
	require.ErrorIs(t, err, objstore.ErrDenied)
	require.ErrorContains(t, err, "s3://bkt/data")
	require.Equal(t, 1, p.Requests()-before, "not retried")

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	none, err := objstore.New(t.Context(), objstore.Options{})
	require.NoError(t, err)
	_, err = none.Open(t.Context(), "s3://bkt/data")
	require.ErrorIs(t, err, objstore.ErrNoCreds)
	require.ErrorContains(t, err, "s3://bkt/data")
}

// A glob lists every page: more objects than a page holds, in key order,
// only those that match.
func TestGlobReadsEveryPage(t *testing.T) {
	srv, p, s := setup(t, nil)
	var want []string
	for i := range 1100 {
		key := fmt.Sprintf("set/shard-%05d.tar", i)
		srv.Put(t, "bkt", key, nil)
		want = append(want, "s3://bkt/"+key)
	}
	srv.Put(t, "bkt", "set/readme.txt", []byte("x"))
	before := p.Requests()
	got, err := s.Glob(t.Context(), "s3://bkt/set/shard-*.tar")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.GreaterOrEqual(t, p.Requests()-before, 2, "two pages at least")
	_, err = s.Glob(t.Context(), "s3://bkt/set/[")
	require.ErrorContains(t, err, "syntax error in pattern")
	none, err := s.Glob(t.Context(), "s3://bkt/other/*")
	require.NoError(t, err)
	require.Empty(t, none)
	require.True(t, strings.HasPrefix(want[0], objstore.Scheme))
}

// Small reads in order are served from a range at a time, and once they
// run on, from windows read ahead; a seek outside them reads a new range.
func TestSmallReadsReadAhead(t *testing.T) {
	data := random(2_000_000)
	_, p, s := setup(t, data)
	o, err := s.Open(t.Context(), "s3://bkt/data")
	require.NoError(t, err)
	defer o.Close()
	before := p.Requests()
	got, err := io.ReadAll(struct{ io.Reader }{o}) // 512-byte reads and up
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Equal(t, 5, p.Requests()-before, "three 256 KiB ranges, then the rest in two windows read ahead")
	_, err = o.Seek(100, io.SeekStart)
	require.NoError(t, err)
	b := make([]byte, 10)
	_, err = io.ReadFull(o, b)
	require.NoError(t, err)
	require.Equal(t, data[100:110], b)
}

// A reader that says where it stops gets nothing read ahead past that;
// one that says nothing gets windows beyond its last read.
func TestReadAheadStopsWhereTheReaderDoes(t *testing.T) {
	data := random(4_000_000)
	_, _, s := setup(t, data)
	read := func(until int64) int64 {
		o, err := s.Open(t.Context(), "s3://bkt/data")
		require.NoError(t, err)
		if until > 0 {
			o.ReadUntil(until)
		}
		_, before := s.Stats()
		buf := make([]byte, 100_000)
		for off := int64(0); off < 1_500_000; off += int64(len(buf)) {
			_, err := o.ReadAt(buf, off)
			require.NoError(t, err)
			require.Equal(t, data[off:off+int64(len(buf))], buf)
		}
		require.NoError(t, o.Close()) // waits for the windows in flight
		_, after := s.Stats()
		return after - before
	}
	require.EqualValues(t, 1_500_000, read(1_500_000), "nothing read past the bound")
	require.Greater(t, read(0), int64(1_500_000), "windows read ahead past the last read")
}

// An upload appears whole, by one PUT or by parts; one whose part fails
// does not appear at all.
func TestUploadsAppearWholeOrNotAtAll(t *testing.T) {
	_, p, s := setup(t, nil)
	dir := t.TempDir()
	for _, n := range []int{1000, 20 << 20} {
		data := random(n)
		local := filepath.Join(dir, fmt.Sprint(n))
		require.NoError(t, os.WriteFile(local, data, 0o644))
		url := fmt.Sprintf("s3://bkt/up/%d", n)
		require.NoError(t, s.Upload(t.Context(), url, local))
		o, err := s.Open(t.Context(), url)
		require.NoError(t, err)
		got := make([]byte, n)
		_, err = o.ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, data, got, "%d bytes", n)
		o.Close()
	}
	parts := 0
	p.SetFaults(func(n int, r *http.Request) s3server.Fault {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			parts++
			if r.URL.Query().Get("partNumber") == "2" {
				return s3server.Fault{Status: http.StatusForbidden}
			}
		}
		return s3server.Fault{}
	})
	require.Error(t, s.Upload(t.Context(), "s3://bkt/up/failed", filepath.Join(dir, fmt.Sprint(20<<20))))
	require.GreaterOrEqual(t, parts, 2, "by parts")
	_, err := s.Open(t.Context(), "s3://bkt/up/failed")
	require.ErrorIs(t, err, objstore.ErrNoObject)
	require.Error(t, s.Upload(t.Context(), "s3://bkt/up/", filepath.Join(dir, "1000")))
}

// A store no connection reaches is said so, naming the URL and what to
// check, and stays retryable: a store that restarts answers again.
func TestAStoreThatCannotBeReachedIsSaidSo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close()) // the port now refuses connections
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	// A name that resolves to nothing: the cause's words depend on the
	// machine's resolver, so only the refused port's are checked.
	for endpoint, cause := range map[string]string{closed: "connection refused", "http://no-such-host.invalid": ""} {
		t.Setenv("AWS_ENDPOINT_URL", endpoint)
		s, err := objstore.New(t.Context(), objstore.Options{Attempts: 2, Backoff: time.Millisecond})
		require.NoError(t, err)
		_, err = s.Open(t.Context(), "s3://bkt/data")
		require.ErrorIs(t, err, objstore.ErrUnreachable, endpoint)
		require.ErrorContains(t, err, "s3://bkt/data: the object store cannot be reached: check AWS_ENDPOINT_URL")
		if cause != "" {
			require.ErrorContains(t, err, cause)
		}
		require.True(t, transient(err), endpoint)
	}
}
