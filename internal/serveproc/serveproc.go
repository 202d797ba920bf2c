// Package serveproc starts data service workers as processes (actorfeed
// serve, or any command that says when it serves) and stops them within
// bounds: sim --network's workers and bench --service-workers'. A process
// that does not serve, or does not stop, in time is an error that carries
// the end of what it wrote on stderr, never a wait without end.
package serveproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServingPrefix starts the line a worker prints once it serves: "serving
// on ADDR", perhaps followed by ", " and more.
const ServingPrefix = "serving on "

// Process is a worker process.
type Process struct {
	cmd    *exec.Cmd
	out    *firstLine
	stderr tail
	killed bool
	exited chan error
	// Addr is the address its serving line gave.
	Addr string
}

// Start runs argv and waits, up to timeout, for its serving line. Its
// other output is dropped; the end of its stderr is kept for errors.
func Start(ctx context.Context, argv []string, timeout time.Duration) (*Process, error) {
	p := &Process{cmd: exec.Command(argv[0], argv[1:]...), out: newFirstLine(ServingPrefix), exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a worker process: %w", err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.out.found:
		p.Addr, _, _ = strings.Cut(strings.TrimPrefix(p.out.line, ServingPrefix), ",")
		return p, nil
	case err := <-p.exited:
		return nil, fmt.Errorf("a worker process ended before serving (%v): %s", err, p.stderr.String())
	case <-timer.C:
	case <-ctx.Done():
	}
	p.Kill()
	_ = p.Stop(timeout)
	return nil, fmt.Errorf("a worker process did not serve within %v: %s", timeout, p.stderr.String())
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause stops the process (SIGSTOP), or resumes it (SIGCONT).
func (p *Process) Pause(on bool) {
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	_ = p.cmd.Process.Signal(sig)
}

// Kill ends the process at once (SIGKILL): its connections close with it.
func (p *Process) Kill() {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
}

// Stop resumes the process, asks it to stop (SIGINT) and waits, up to
// timeout, for its exit status, which is its verdict (a killed process's
// is not its own): 128 + SIGINT, as actorfeed serve exits once stopped
// cleanly by it, is clean. Past timeout it is killed and that is the
// error.
func (p *Process) Stop(timeout time.Duration) error {
	p.Pause(false) // a stopped process would not see SIGINT
	if !p.killed {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-p.exited:
	case <-timer.C:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("a worker process did not stop within %v of SIGINT: %s", timeout, p.stderr.String())
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 128+int(syscall.SIGINT) {
		err = nil
	}
	if p.killed || err == nil {
		return nil
	}
	return fmt.Errorf("a worker process stopped with %v: %s", err, strings.TrimSpace(p.stderr.String()))
}

// firstLine is a process's stdout: it keeps the first line that starts
// with prefix, and drops the rest.
type firstLine struct {
	prefix string
	mu     sync.Mutex
	buf    []byte
	line   string // read once found is closed
	seen   bool
	found  chan struct{}
}

func newFirstLine(prefix string) *firstLine {
	return &firstLine{prefix: prefix, found: make(chan struct{})}
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	for {
		line, rest, ok := bytes.Cut(f.buf, []byte("\n"))
		if !ok {
			break
		}
		if bytes.HasPrefix(line, []byte(f.prefix)) {
			f.seen, f.line, f.buf = true, string(line), nil
			close(f.found)
			break
		}
		f.buf = rest
	}
	if len(f.buf) > tailBytes { // a line that long is not the one
		f.buf = f.buf[len(f.buf)-tailBytes:]
	}
	return len(p), nil
}

// tailBytes is how much of a process's stderr a tail keeps.
const tailBytes = 4 << 10

// tail keeps the last tailBytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
