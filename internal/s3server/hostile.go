package s3server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// The behaviours of a hostile server (Fault's Endless, Trickle,
// RepeatToken and EndlessListing): what a broken or malicious store, or a
// middlebox before one, can do to a client that trusts it.

// endlessBody is a body that goes on after its own bytes with bytes of
// nothing, until the client hangs up.
type endlessBody struct {
	r   io.ReadCloser
	ctx context.Context
	eof bool
}

func (e *endlessBody) Read(p []byte) (int, error) {
	if !e.eof {
		n, err := e.r.Read(p)
		if err == io.EOF {
			e.eof, err = true, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
	if err := e.ctx.Err(); err != nil {
		return 0, err
	}
	clear(p)
	return len(p), nil
}

func (e *endlessBody) Close() error { return e.r.Close() }

// trickleBody sends its body a byte at a time, every so often.
type trickleBody struct {
	r     io.ReadCloser
	every time.Duration
	ctx   context.Context
}

func (t *trickleBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !wait(t.ctx, t.every) {
		return 0, t.ctx.Err()
	}
	return t.r.Read(p[:1])
}

func (t *trickleBody) Close() error { return t.r.Close() }

var truncated = regexp.MustCompile(`<IsTruncated>[a-z]*</IsTruncated>`)

// repeatToken makes a listing's answer say that more pages follow under
// one continuation token, the same every time.
func repeatToken(resp *http.Response) error {
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	b = truncated.ReplaceAll(b, []byte(`<IsTruncated>true</IsTruncated><NextContinuationToken>the-same-token</NextContinuationToken>`))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// endlessListing answers a ListObjectsV2 with a page of 1,000 keys under
// its prefix, numbered on from its continuation token, and the next
// token: a listing that never ends.
func endlessListing(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, from := q.Get("prefix"), 0
	if t := q.Get("continuation-token"); t != "" {
		from, _ = strconv.Atoi(t)
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	fmt.Fprintf(&b, `<Name>bucket</Name><Prefix>%s</Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>`, prefix)
	for k := from; k < from+1000; k++ {
		fmt.Fprintf(&b, `<Contents><Key>%sshard-%09d.tar</Key><Size>10240</Size><ETag>"e"</ETag><StorageClass>STANDARD</StorageClass></Contents>`, prefix, k)
	}
	fmt.Fprintf(&b, `<NextContinuationToken>%d</NextContinuationToken></ListBucketResult>`, from+1000)
	w.Header().Set("Content-Type", "application/xml")
	_, _ = w.Write(b.Bytes())
}
