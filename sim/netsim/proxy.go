package netsim

import (
	"net"
	"sync"
	"time"
)

// Proxy is a fault-injecting TCP proxy: it forwards every connection made
// to Addr to its target, and on command delays what it forwards, drops
// its connections, stalls them (holding them open, forwarding nothing) or
// cuts them part way through a message. The network scenarios put one
// between a service's client and each worker, and one before the client.
type Proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	delay  time.Duration
	stall  chan struct{} // closed while not stalled
	cut    int           // bytes still forwarded before connections are cut (-1: no cut)
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on a free loopback port; SetTarget says where to.
func NewProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{}, stall: make(chan struct{}), cut: -1}
	close(p.stall)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets the address connections are forwarded to.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Delay holds every chunk forwarded from now on for d (0: none).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Drop closes every connection: the peers see them reset.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Stall stops forwarding, keeping the connections open (a hung peer, or a
// partition the kernel does not report), until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stall:
		p.stall = make(chan struct{})
	default: // stalled already
	}
}

// Resume ends a stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stall:
	default:
		close(p.stall)
	}
}

// CutAfter forwards n more bytes, then drops every connection: a message
// cut part way through.
func (p *Proxy) CutAfter(n int) {
	p.mu.Lock()
	p.cut = n
	p.mu.Unlock()
}

// Close stops the proxy: its listener and connections close, and its
// goroutines end.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Resume()
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, closed := p.target, p.closed
		p.mu.Unlock()
		out, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil || closed {
			in.Close()
			if out != nil {
				out.Close()
			}
			continue
		}
		if !p.track(in, out) {
			continue
		}
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// track keeps a connection pair for Drop, unless the proxy closed.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		in.Close()
		out.Close()
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}

// pipe forwards src to dst under the faults, until either ends.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(dst, buf[:n]) {
			return
		}
		if err != nil {
			return // EOF or a reset: the other side is closed with it
		}
	}
}

// forward writes b to dst after the stall and delay in force; false when
// the connection is to end (cut, or closed).
func (p *Proxy) forward(dst net.Conn, b []byte) bool {
	p.mu.Lock()
	stall, delay := p.stall, p.delay
	p.mu.Unlock()
	<-stall
	if delay > 0 {
		time.Sleep(delay) // the simulated latency
	}
	p.mu.Lock()
	cut := p.cut
	if cut >= 0 {
		if len(b) > cut {
			b = b[:cut]
		}
		p.cut -= len(b)
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	if _, err := dst.Write(b); err != nil {
		return false
	}
	if cut >= 0 && p.cutDone() {
		p.Drop()
		return false
	}
	return true
}

// cutDone says whether a cut's bytes were forwarded, ending the cut.
func (p *Proxy) cutDone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == 0 {
		p.cut = -1
		return true
	}
	return false
}
