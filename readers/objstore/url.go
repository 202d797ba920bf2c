package objstore

import (
	"fmt"
	"strings"
)

// Scheme starts every URL this package reads.
const Scheme = "s3://"

// IsURL reports whether path names an object rather than a file.
func IsURL(path string) bool { return strings.HasPrefix(path, Scheme) }

// URL is an object's, or a prefix's, place: s3://Bucket/Key.
type URL struct{ Bucket, Key string }

// ParseURL reads s3://bucket/key; the key may be empty (a whole bucket).
func ParseURL(s string) (URL, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return URL{}, fmt.Errorf("objstore: %q: not an %s URL", s, Scheme)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return URL{}, fmt.Errorf("objstore: %q: no bucket (want %sbucket/key)", s, Scheme)
	}
	return URL{Bucket: bucket, Key: key}, nil
}

func (u URL) String() string { return Scheme + u.Bucket + "/" + u.Key }
