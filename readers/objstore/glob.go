package objstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The bounds of a listing. A store that hands back a continuation token it
// gave before lists the same pages for ever, and one that never says its
// listing is done lists without end: either would grow the matches until
// the process runs out of memory, or list until the job's deadline.
const (
	// MaxMatches is the most objects a pattern may match: more shards
	// than any data set we know of is made of. Past it, name a narrower
	// pattern.
	MaxMatches = 1 << 20
	// MaxListPages is the most pages a listing may take: at a thousand
	// keys a page (S3's), a prefix of 64 million keys.
	MaxListPages = 1 << 16
)

// ErrListing is a listing the store cannot finish: a continuation token
// given twice, no token on a page that says more follow, more pages or
// matches than the bounds above.
var ErrListing = errors.New("the listing cannot be finished")

// Glob lists the objects whose keys match pattern's (path.Match: a * does
// not cross a /), over every page of the listing of the keys before its
// first wildcard, as URLs in key order. A listing past the store's
// MaxListPages or MaxMatches (Options), or one the store makes loop, is an
// error wrapping ErrListing and naming the prefix.
func (s *Store) Glob(ctx context.Context, pattern string) ([]string, error) {
	u, err := ParseURL(pattern)
	if err != nil {
		return nil, err
	}
	if _, err := path.Match(u.Key, ""); err != nil {
		return nil, fmt.Errorf("%s: %w", pattern, err)
	}
	prefix := u.Key
	if i := strings.IndexAny(prefix, `*?[\`); i >= 0 {
		prefix = prefix[:i]
	}
	listed := URL{Bucket: u.Bucket, Key: prefix}
	var out []string
	var token *string
	tokens := map[string]bool{}
	for page := 0; ; page++ {
		if page == s.opts.MaxListPages {
			return nil, fmt.Errorf("listing %s: %w: more than %d pages: name a narrower pattern", listed, ErrListing, s.opts.MaxListPages)
		}
		res, err := s.listPage(ctx, u.Bucket, prefix, token)
		if err != nil {
			return nil, fmt.Errorf("listing %s: page %d: %w", listed, page+1, err)
		}
		for _, obj := range res.Contents {
			if ok, _ := path.Match(u.Key, aws.ToString(obj.Key)); ok {
				if len(out) == s.opts.MaxMatches {
					return nil, fmt.Errorf("%s: %w: it matches more than %d objects: name a narrower pattern", pattern, ErrListing, s.opts.MaxMatches)
				}
				out = append(out, URL{Bucket: u.Bucket, Key: *obj.Key}.String())
			}
		}
		if !aws.ToBool(res.IsTruncated) {
			return out, nil
		}
		next := aws.ToString(res.NextContinuationToken)
		switch {
		case next == "":
			return nil, fmt.Errorf("listing %s: %w: page %d says more follow, and gives no continuation token", listed, ErrListing, page+1)
		case tokens[next]:
			return nil, fmt.Errorf("listing %s: %w: the store gave the continuation token %.40q twice (page %d): its listing loops", listed, ErrListing, next, page+1)
		}
		tokens[next], token = true, &next
	}
}

// pageBytes is what a listing's page is given time for at MinRate.
const pageBytes = 1 << 20

// listPage lists one page of bucket's keys under prefix from token. The
// page must arrive within the body deadline of pageBytes: a page that
// trickles in never stalls.
func (s *Store) listPage(ctx context.Context, bucket, prefix string, token *string) (*s3.ListObjectsV2Output, error) {
	s.asked()
	deadline := s.bodyDeadline(pageBytes)
	pctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	res, err := s.client.ListObjectsV2(pctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, ContinuationToken: token})
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case pctx.Err() != nil:
		return nil, retryable{fmt.Errorf("%w: no page within %v (slower than %d bytes a second)", ErrListing, deadline, s.opts.MinRate)}
	}
	return nil, describe(URL{Bucket: bucket, Key: prefix}, err)
}
