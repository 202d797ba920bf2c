package objstore

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Glob lists the objects whose keys match pattern's (path.Match: a * does
// not cross a /), over every page of the listing of the keys before its
// first wildcard, as URLs in key order.
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
	var out []string
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &u.Bucket, Prefix: &prefix})
	for pages.HasMorePages() {
		s.asked()
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, describe(URL{Bucket: u.Bucket, Key: prefix}, err)
		}
		for _, obj := range page.Contents {
			if ok, _ := path.Match(u.Key, *obj.Key); ok {
				out = append(out, URL{Bucket: u.Bucket, Key: *obj.Key}.String())
			}
		}
	}
	return out, nil
}
