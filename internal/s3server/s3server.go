// Package s3server starts Versity's S3 gateway (a server people run in
// production, over a directory) on 127.0.0.1 for tests, and a proxy in
// front of it that injects the faults object stores have: throttling,
// errors, bodies cut off mid-object. Only tests import it.
package s3server

import (
	"bufio"
	"bytes"
	"context"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

// Module is what .ci/run installs: go install Module@Version.
const (
	Module  = "github.com/versity/versitygw/cmd/versitygw"
	Version = "v1.8.0"
)

// The root account's keys and the region the gateway answers to.
const (
	AccessKey = "actorfeed-test"
	SecretKey = "actorfeed-test-secret"
	Region    = "us-east-1"
)

// Server is a running gateway.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	Dir      string // its buckets are directories here
	client   *s3.Client
}

// Binary finds versitygw: $ACTORFEED_VERSITYGW, then PATH, then Go's bin
// directory. Without it a test fails under CI, and skips elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ACTORFEED_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := "Versity's S3 gateway is not installed: go install " + Module + "@" + Version
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Start runs a gateway over a new directory until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, dir := Binary(t), t.TempDir()
	for range 3 { // a port found free can be taken before the gateway binds it
		if s := start(t, bin, dir); s != nil {
			return s
		}
	}
	t.Fatal("versitygw did not start on any of 3 ports")
	return nil
}

// start runs the gateway on a free port; nil when it exits before it
// listens.
func start(t testing.TB, bin, dir string) *Server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", addr, "posix", dir) // its banner (not printed under --quiet) says it listens
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	listening := make(chan bool, 1)
	drained := make(chan struct{})
	go func() { // the banner says when it listens; the rest is drained
		defer close(drained)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "http://"+addr) {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-drained
		_ = cmd.Wait()
	}
	select {
	case ok := <-listening:
		if !ok {
			stop()
			t.Logf("versitygw on %s exited: %s", addr, stderr.String())
			return nil
		}
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("versitygw on %s did not listen within 30 s: %s", addr, stderr.String())
	}
	t.Cleanup(stop)
	return &Server{Endpoint: "http://" + addr, Dir: dir}
}

// Env points the AWS environment of the test at endpoint (the server's,
// or a proxy's) with the server's keys, and away from the user's files.
func (s *Server) Env(t testing.TB, endpoint string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": AccessKey, "AWS_SECRET_ACCESS_KEY": SecretKey, "AWS_SESSION_TOKEN": "",
		"AWS_REGION": Region, "AWS_ENDPOINT_URL": endpoint, "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(s.Dir, "no-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(s.Dir, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// Client is a client of the server with its keys, for a test's set-up.
func (s *Server) Client() *s3.Client {
	if s.client != nil {
		return s.client
	}
	s.client = s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
	return s.client
}

// Bucket makes a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	_, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name})
	require.NoError(t, err)
}

// Put writes an object.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	_, err := s.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	require.NoError(t, err)
}

// PutFiles writes the files matching pattern as objects named by their
// base names under prefix, and returns their URLs.
func (s *Server) PutFiles(t testing.TB, bucket, prefix, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, files, pattern)
	var urls []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		key := prefix + filepath.Base(f)
		s.Put(t, bucket, key, b)
		urls = append(urls, "s3://"+bucket+"/"+key)
	}
	return urls
}
