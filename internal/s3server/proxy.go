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
	"time"
)

// Fault is what a Proxy does to one request.
type Fault struct {
	Status int   // answer this status (with an S3 error body) instead of passing the request on
	Cut    int64 // pass it on, but cut the answer's body off after this many bytes (0: do not)
	// Stall passes the request on, but sends nothing of the answer's body
	// after this many bytes until the client hangs up (0: do not).
	Stall int64
	// Delay waits this long, or until the client hangs up, before doing
	// the rest: a Delay longer than the client waits is a stalled server.
	Delay time.Duration
	// Drop closes the connection without an answer.
	Drop bool
	// Endless passes the request on, and its answer's body, and then
	// goes on sending bytes (chunked, no length) until the client hangs
	// up: a body that never ends.
	Endless bool
	// Trickle passes the request on, and sends its answer's body a byte
	// every Trickle: a body too slow ever to stall.
	Trickle time.Duration
	// RepeatToken passes a listing on, and answers that more pages
	// follow, each under the same continuation token: a listing that
	// loops.
	RepeatToken bool
	// EndlessListing answers a listing itself with a page of 1,000 keys
	// under Prefix, and a new continuation token, for ever.
	EndlessListing bool
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
		f, ok := resp.Request.Context().Value(faultKey{}).(Fault)
		if !ok {
			return nil
		}
		ctx := resp.Request.Context()
		switch {
		case f.Cut > 0 || f.Stall > 0:
			resp.Body = &cutBody{r: resp.Body, left: max(f.Cut, f.Stall), stall: f.Stall > 0, ctx: ctx}
		case f.Endless:
			resp.Body, resp.ContentLength = &endlessBody{r: resp.Body, ctx: ctx}, -1
			resp.Header.Del("Content-Length")
		case f.Trickle > 0:
			resp.Body = &trickleBody{r: resp.Body, every: f.Trickle, ctx: ctx}
		case f.RepeatToken:
			return repeatToken(resp)
		}
		return nil
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := p.fault(r)
		if f.Delay > 0 && !wait(r.Context(), f.Delay) {
			return
		}
		if f.Drop {
			drop(w)
			return
		}
		if f.Status != 0 {
			_, _ = io.Copy(io.Discard, r.Body) // as a server does: the client sees the answer, not a reset
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(f.Status)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code(f.Status)+`</Code><Message>injected</Message></Error>`)
			return
		}
		if f.EndlessListing {
			endlessListing(w, r)
			return
		}
		if f.Cut > 0 || f.Stall > 0 || f.Endless || f.Trickle > 0 || f.RepeatToken {
			r = r.WithContext(context.WithValue(r.Context(), faultKey{}, f))
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

// wait waits d, and reports false if the client hung up first.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// drop closes the connection under w without a word.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// cutBody ends a body after left bytes: with an error, on which the
// reverse proxy aborts the connection as a reset mid-object does, or, to
// stall, by waiting for the client to hang up.
type cutBody struct {
	r     io.ReadCloser
	left  int64
	stall bool
	ctx   context.Context
}

var errCut = errors.New("s3server: body cut off")

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if c.stall {
			<-c.ctx.Done()
		}
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

type faultKey struct{}
