package s3server

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Fault is what a Proxy does to one request.
type Fault struct {
	Status int   // answer this status (with an S3 error body) instead of passing the request on
	Cut    int64 // pass it on, but cut the answer's body off after this many bytes (0: do not)
}

// Proxy passes requests to a server, doing to each what SetFaults says.
type Proxy struct {
	URL string
	mu  sync.Mutex
	// faults is asked, under the proxy's lock, what to do to the n-th
	// request (from 0) since SetFaults.
	faults   func(n int, r *http.Request) Fault
	requests int
	srv      *httptest.Server
}

// NewProxy starts a proxy to s until the test ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	p, err := StartProxy(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy starts a proxy to s until Close.
func StartProxy(s *Server) (*Proxy, error) {
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, err
	}
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a cut body is the point, not news
	rp.FlushInterval = -1                    // so that a body is cut after its headers and bytes went out
	rp.ModifyResponse = func(resp *http.Response) error {
		if cut, ok := resp.Request.Context().Value(cutKey{}).(int64); ok && cut > 0 {
			resp.Body = &cutBody{r: resp.Body, left: cut}
		}
		return nil
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := p.fault(r)
		if f.Status != 0 {
			_, _ = io.Copy(io.Discard, r.Body) // as a server does: the client sees the answer, not a reset
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(f.Status)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code(f.Status)+`</Code><Message>injected</Message></Error>`)
			return
		}
		if f.Cut > 0 {
			r = r.WithContext(withCut(r.Context(), f.Cut))
		}
		rp.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() { p.srv.Close() }

// SetFaults sets what the proxy does to each request from now on, its
// count started again.
func (p *Proxy) SetFaults(f func(n int, r *http.Request) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults, p.requests = f, 0
}

// Requests is how many requests the proxy has had.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

func (p *Proxy) fault(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.requests
	p.requests++
	if p.faults == nil {
		return Fault{}
	}
	return p.faults(n, r)
}

func code(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "SlowDown"
	case http.StatusInternalServerError:
		return "InternalError"
	}
	return "InjectedFault"
}

// cutBody ends a body with an error after left bytes: the reverse proxy
// then aborts the connection, as a reset mid-object does.
type cutBody struct {
	r    io.ReadCloser
	left int64
}

var errCut = errors.New("s3server: body cut off")

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }

type cutKey struct{}

func withCut(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, cutKey{}, n)
}
