package objstore

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// maxAnswerBytes bounds an answer of unstated length (chunked) that is no
// ranged GET: a listing's page, an error's body. S3's pages of a thousand
// keys of 1 KiB hold about 1.3 MiB.
const maxAnswerBytes = 16 << 20

// errLongAnswer is an answer that goes on past what was asked for.
var errLongAnswer = errors.New("the store's answer goes on past what was asked for")

// boundBodies bounds the body of every answer that does not say its
// length: a ranged GET's to its range (and drainBytes more), any other's
// to maxAnswerBytes. A body that never ends would otherwise be read for
// ever, by the SDK itself: it drains a page's body after parsing it. It is
// a middleware, not an HTTP client of our own, so that the SDK's own
// client stays configurable (a custom CA bundle needs it).
func boundBodies(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("actorfeedBoundBodies",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			resp, ok := out.RawResponse.(*smithyhttp.Response)
			if !ok || resp.ContentLength >= 0 {
				return out, md, err
			}
			limit := int64(maxAnswerBytes)
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				if n, ok := rangeLength(req.Header.Get("Range")); ok {
					limit = n + drainBytes
				}
			}
			resp.Body = &boundedBody{ReadCloser: resp.Body, left: limit}
			return out, md, err
		}), middleware.After)
}

// rangeLength is the bytes a Range header of "bytes=a-b" asks for.
func rangeLength(h string) (int64, bool) {
	a, b, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !ok || !strings.HasPrefix(h, "bytes=") {
		return 0, false
	}
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, false
	}
	return hi - lo + 1, true
}

// boundedBody fails a read past its limit.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errLongAnswer
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
