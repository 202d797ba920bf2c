// Package s3servertest runs s3server's gateway and proxy for a test: each
// stops when the test ends, and what goes wrong fails the test. Without
// the gateway a test fails under CI and skips elsewhere.
package s3servertest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/actorfeed/actorfeed/internal/s3server"
)

// Server is a gateway a test runs.
type Server struct{ *s3server.Server }

// Binary is Find for a test: without the gateway it fails under CI, and
// skips elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := s3server.Find()
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
	return ""
}

// Start runs a gateway over a new directory until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := s3server.Launch(Binary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &Server{s}
}

// NewProxy starts a proxy to s until the test ends.
func NewProxy(t testing.TB, s *Server) *s3server.Proxy {
	t.Helper()
	p, err := s3server.StartProxy(s.Server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Env points the AWS environment of the test at endpoint (the server's,
// or a proxy's) with the server's keys, and away from the user's files.
func (s *Server) Env(t testing.TB, endpoint string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": s3server.AccessKey, "AWS_SECRET_ACCESS_KEY": s3server.SecretKey, "AWS_SESSION_TOKEN": "",
		"AWS_REGION": s3server.Region, "AWS_ENDPOINT_URL": endpoint, "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(s.Dir, "no-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(s.Dir, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// Bucket makes a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := s.MakeBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// Put writes an object.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) (etag string) {
	t.Helper()
	out, err := s.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.ETag)
}

// PutFiles writes the files matching pattern as objects named by their
// base names under prefix, and returns their URLs.
func (s *Server) PutFiles(t testing.TB, bucket, prefix, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no files (%v)", pattern, err)
	}
	var urls []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + filepath.Base(f)
		s.Put(t, bucket, key, b)
		urls = append(urls, "s3://"+bucket+"/"+key)
	}
	return urls
}

// Rhythm is a store flaky in a fixed rhythm, for a proxy's SetFaults: a
// GET's body is cut off after CutAt bytes when its number n has n%Cut ==
// Cut/2, and request n is otherwise answered 503 SlowDown when
// n%Throttle == Throttle/2 (0: never).
type Rhythm struct {
	Cut      int
	CutAt    int64
	Throttle int
}

// Faults is the fault of request n.
func (y Rhythm) Faults(n int, r *http.Request) s3server.Fault {
	switch {
	case y.Cut > 0 && r.Method == http.MethodGet && n%y.Cut == y.Cut/2:
		return s3server.Fault{Cut: y.CutAt}
	case y.Throttle > 0 && n%y.Throttle == y.Throttle/2:
		return s3server.Fault{Status: http.StatusServiceUnavailable}
	}
	return s3server.Fault{}
}
