package benchmark

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// loopbackWrite is the size of Loopback's writes: gRPC's frames are
// written from buffers of about this size.
const loopbackWrite = 32 << 10

// Loopback measures how fast n bytes cross one TCP connection on the
// loopback interface, written in 32 KiB writes and read by another
// goroutine, doing nothing else: a ceiling for any batch a worker process
// sends on this machine, in bytes a second.
func Loopback(ctx context.Context, n int64) (float64, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("loopback: %w", err)
	}
	defer ln.Close()
	type result struct {
		n   int64
		err error
	}
	read := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			read <- result{err: err}
			return
		}
		defer c.Close()
		got, err := io.Copy(io.Discard, c)
		read <- result{got, err}
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("loopback: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, loopbackWrite)
	start := time.Now()
	for sent := int64(0); sent < n && err == nil; sent += loopbackWrite {
		_, err = c.Write(buf)
	}
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	r := <-read
	elapsed := time.Since(start)
	if err == nil {
		err = r.err
	}
	if err != nil {
		return 0, fmt.Errorf("loopback: %w", err)
	}
	return float64(r.n) / elapsed.Seconds(), nil
}
