package actors

import "sync"

// pool is the dispatcher of a pipeline's actors. protoactor's default runs
// every scheduling of a mailbox on a new goroutine, whose stack then grows
// anew through a stage's call depth, every time (docs/performance.md has
// what that cost). The pool keeps the goroutines that ran a mailbox
// and hands them the next one; it starts another only when none is idle,
// so no mailbox ever waits for a goroutine, and it never holds more than
// the pipeline's actors can keep busy at once.
type pool struct {
	work chan func()
	quit chan struct{}

	mu      sync.Mutex
	closed  bool
	started int // goroutines started, for tests
	wg      sync.WaitGroup
}

// throughput is how many messages a mailbox handles before it yields (as
// protoactor's default).
const throughput = 300

func newPool() *pool { return &pool{work: make(chan func()), quit: make(chan struct{})} }

// Schedule runs fn on an idle goroutine of the pool, or on a new one. After
// close it runs fn on a goroutine of its own: a message can still reach a
// stopped actor's mailbox.
func (p *pool) Schedule(fn func()) {
	select {
	case p.work <- fn:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go fn()
		return
	}
	p.wg.Add(1)
	p.started++
	p.mu.Unlock()
	go p.run(fn)
}

func (p *pool) Throughput() int { return throughput }

func (p *pool) run(fn func()) {
	defer p.wg.Done()
	for {
		fn()
		select {
		case fn = <-p.work:
		case <-p.quit:
			return
		}
	}
}

// close ends the idle goroutines and waits for the busy ones to finish what
// they run.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
