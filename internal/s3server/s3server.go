// Package s3server starts Versity's S3 gateway (a server people run in
// production, over a directory) on 127.0.0.1 for tests and for the object
// store scenarios of sim/objsim, and a proxy in front of it that injects
// the faults object stores have: throttling, errors, bodies cut off or
// stalled mid-object, dropped connections, delays. Its s3servertest runs
// them for a test.
package s3server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Module and Version are what dev.sh installs: go install Module@Version.
const (
	Module  = "github.com/versity/versitygw/cmd/versitygw"
	Version = "v1.8.0"
)

// IOBufferSize is the read buffer the gateway's posix backend allocates
// for each GET and PUT, in bytes.
const IOBufferSize = "131072"

// CPUsEnv, when set, is a CPU list (taskset's) the gateway runs on: a
// benchmark run under taskset on the other CPUs then measures the client
// with the server on cores of its own, as an object store's servers are
// (docs/performance.md).
const CPUsEnv = "ACTORFEED_S3SERVER_CPUS"

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
	stop     func()
}

// Find finds versitygw: $ACTORFEED_VERSITYGW, then PATH, then Go's bin
// directory.
func Find() (string, error) {
	if p := os.Getenv("ACTORFEED_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", errors.New("versitygw (Versity's S3 gateway) is not installed: go install " + Module + "@" + Version)
}

// Launch runs the gateway bin over dir until Close.
func Launch(bin, dir string) (*Server, error) {
	var errs []error
	for range 3 { // a port found free can be taken before the gateway binds it
		s, err := launch(bin, dir)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("versitygw did not start: %w", errors.Join(errs...))
}

// launch runs the gateway on a free port.
func launch(bin, dir string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Keep-alive, as S3 and any server run for throughput keep it: without
	// it the gateway closes the connection after every answer, and each
	// request dials anew. Its posix backend allocates a fresh read buffer
	// for every GET, 1 MiB by default: zeroing it led the gateway's profile
	// under ranged reads of a chunk, on cores it shares with the client.
	args := []string{bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region, "--keep-alive",
		"--port", addr, "posix", "--io-buffer-size", IOBufferSize, dir} // its banner (not under --quiet) says it listens
	if cpus := os.Getenv(CPUsEnv); cpus != "" {
		// taskset execs the gateway: the process started is the gateway.
		args = append([]string{"taskset", "--cpu-list", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
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
	s := &Server{Endpoint: "http://" + addr, Dir: dir, stop: func() {
		_ = cmd.Process.Kill()
		<-drained
		_ = cmd.Wait()
	}}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case ok := <-listening:
		if !ok {
			s.stop()
			return nil, fmt.Errorf("versitygw on %s exited: %s", addr, stderr.String())
		}
	case <-t.C:
		s.stop()
		return nil, fmt.Errorf("versitygw on %s did not listen within 30 s: %s", addr, stderr.String())
	}
	return s, nil
}

// Close stops the gateway.
func (s *Server) Close() { s.stop() }

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

// MakeBucket makes a bucket.
func (s *Server) MakeBucket(ctx context.Context, name string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	return err
}
