package scenario

import (
	"context"
	"errors"
	"sync"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// errProducer is the error a queue scenario's producer kills the queue
// with (Shape.QueueKill).
var errProducer = errors.New("sim: the producer failed")

// feeder is a queue scenario's producer: a goroutine a pass that pushes
// the pass's records into the queue and closes it, or kills it.
type feeder struct {
	sh Shape
	q  *readers.FeedQueue
	wg sync.WaitGroup
}

func newFeeder(sh Shape) (*feeder, error) {
	q, err := readers.NewFeedQueue(sh.QueueCap, nil)
	if err != nil {
		return nil, err
	}
	return &feeder{sh: sh, q: q}, nil
}

func (f *feeder) stage() actors.Stage { return actors.Queue{Queue: f.q} }

// begin starts the producer of pass p: the last pass's has ended (it
// closed the queue, and the pass was read to that end), so the queue is
// opened again for this one. It is called before the pipeline is Reset
// into the pass.
func (f *feeder) begin(ctx context.Context, pass int) {
	f.wg.Wait()
	if pass > 0 {
		f.q.ReOpen()
	}
	n, kill := f.sh.QueueLens[pass], 0
	if pass == f.sh.Passes-1 {
		kill = f.sh.QueueKill
	}
	f.wg.Go(func() {
		for r := range n {
			if kill > 0 && r == kill {
				f.q.Kill(errProducer)
				return
			}
			s, err := records.Sample(0, r, f.sh.Ragged)
			if err != nil {
				f.q.Kill(err)
				return
			}
			// Push fails once the pipeline is closed (it closes its
			// queues), or at the scenario's deadline.
			if f.q.Push(ctx, s) != nil {
				return
			}
		}
		f.q.Close()
	})
}

// wait waits for the producer; the pipeline is closed, which closes the
// queue and ends a producer blocked in Push.
func (f *feeder) wait() { f.wg.Wait() }

// expectQueue is what a queue scenario delivers: in pass p the first
// QueueLens[p] records pushed, each once; with QueueKill, the error.
func expectQueue(sh Shape, faults []Fault) expectation {
	e := expectation{copies: 1, byPass: make([][]uint64, sh.Passes)}
	for p, n := range sh.QueueLens {
		for r := range n {
			e.byPass[p] = append(e.byPass[p], messages.SampleID(0, r))
		}
	}
	e.killed = sh.QueueKill > 0
	for _, f := range faults {
		e.storm = e.storm || f.Kind == sim.PanicStorm
	}
	return e
}
