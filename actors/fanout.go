package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// fanoutCell is what the double-buffer stage persists: one outlet (a
// prefetch window) per consumer lane. Item k of a pass goes to lane k mod n,
// so which device gets which batch is fixed by the data order alone. The
// deal stage before the lanes (lanes.go) is one too, without reading ahead.
//
// Once its upstream ended a pass (from the second pass on: a pipeline that
// was never reset may never be), the double buffer reads the next pass
// ahead (a window per lane), while its consumers still drain the one that
// ended: the next pass starts from full buffers instead of from an empty
// pipeline. The items read ahead wait in the cell, unrouted, until a
// consumer subscribes to that pass (Reset); a pass nobody asks for is
// dropped with the pipeline.
type fanoutCell struct {
	cell
	in          inlet
	outs        []outlet
	window      int  // prefetch per lane
	dropPartial bool // drop the last step when it has fewer than n items
	readsAhead  bool // reads the next pass ahead (the double buffer)
	pass        uint32
	running     bool
	routed      uint64            // items routed this pass
	step        []*messages.Batch // dropPartial: the step being assembled
	skipped     uint64

	ahead     []*messages.Batch // items of pass+1 read ahead
	aheadEnd  *messages.End     // pass+1 ended while read ahead
	aheadFail *messages.Failure // pass+1 failed while read ahead
}

// readingAhead says whether the inlet reads the pass after the lanes'.
func (c *fanoutCell) readingAhead() bool { return c.running && c.in.pass == c.pass+1 }

type fanoutActor struct{ c *fanoutCell }

func (a *fanoutActor) Receive(ctx actor.Context) {
	c := a.c
	defer func() {
		held := len(c.step)
		for i := range c.outs {
			held += c.outs[i].held()
		}
		c.meter.gauge(held, c.in.outstanding)
	}()
	msg, send := c.receive(ctx)
	var settle bool // the message may have freed or brought items: flush and ask for more
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			c.in.reopen(send, a.room())
			c.announce(send)
		}
	case *messages.Subscribe:
		settle = a.onSubscribe(send, ctx.Sender(), m)
	case *messages.Demand:
		settle = a.onDemand(send, ctx.Sender(), m)
	case *messages.Cancel:
		// a lane's consumer left; the others go on
	case *messages.Resubscribe:
		c.in.reopen(send, a.room())
	case *messages.Batch:
		settle = a.onBatch(send, m)
	case *messages.End:
		settle = a.onEnd(send, m)
	case *messages.Failure:
		settle = a.onFailure(m)
	}
	if settle {
		for i := range c.outs {
			c.outs[i].flush(send)
		}
		c.in.replenish(send, a.room(), c.in.next)
	}
}

// onSubscribe takes a lane's subscription. One for another pass starts that
// pass: from what was read ahead when it is the pass being read ahead.
func (a *fanoutActor) onSubscribe(send func(*actor.PID, any), from *actor.PID, m *messages.Subscribe) bool {
	c := a.c
	if int(m.Lane) >= len(c.outs) {
		a.fail(send, errLane(m.Lane, len(c.outs)))
		return false
	}
	o := &c.outs[m.Lane]
	if o.sub != nil && m.Epoch <= o.epoch && m.Pass == c.pass {
		return false
	}
	if !c.running || m.Pass != c.pass {
		ahead := c.readingAhead() && m.Pass == c.in.pass
		for _, b := range c.step {
			c.pipe.discard(b)
		}
		c.pass, c.running, c.routed, c.step, c.skipped = m.Pass, true, 0, nil, 0
		for i := range c.outs {
			c.outs[i].reset(m.Pass)
		}
		if ahead {
			a.switchToAhead()
		} else {
			a.dropAhead()
			c.in.subscribe(send, m.Pass, 0, 0)
		}
	}
	if err := o.subscribe(from, m); err != nil {
		a.fail(send, err)
		return false
	}
	return true
}

// onDemand credits the lane that asked.
func (a *fanoutActor) onDemand(send func(*actor.PID, any), from *actor.PID, m *messages.Demand) bool {
	c := a.c
	for i := range c.outs {
		if c.outs[i].epoch == m.Epoch && c.outs[i].sub.Equal(from) {
			if err := c.outs[i].onDemand(m); err != nil {
				a.fail(send, err)
				return false
			}
		}
	}
	return true
}

// onBatch takes an item in: routed to the lanes, or kept while the next
// pass is read ahead.
func (a *fanoutActor) onBatch(send func(*actor.PID, any), m *messages.Batch) bool {
	c := a.c
	if !c.in.admit(send, m.Epoch, m.Seq, a.room()) {
		return false
	}
	c.in.commit()
	item := &messages.Batch{Pass: c.in.pass, Slots: m.Slots, Parts: m.Parts, Rows: m.Rows, Ids: m.Ids}
	keepPlace(item, m)
	if c.readingAhead() {
		c.ahead = append(c.ahead, item)
		c.pipe.ahead.Add(1)
	} else {
		a.take(item)
	}
	return true
}

// onEnd takes the upstream's end of a pass.
func (a *fanoutActor) onEnd(send func(*actor.PID, any), m *messages.End) bool {
	c := a.c
	if !c.in.admitEnd(send, m, a.room()) {
		return false
	}
	c.in.ended = true
	if c.readingAhead() {
		c.aheadEnd = m
		return true
	}
	a.end(m)
	// Read the next pass ahead while the consumers drain this one, once the
	// pipeline was reset at least once: a single-pass run would only waste
	// the work.
	if c.pass > 0 && c.readsAhead {
		c.in.subscribe(send, c.pass+1, 0, a.room())
	}
	return true
}

// onFailure passes the upstream's failure to every lane, or keeps it for
// the pass being read ahead.
func (a *fanoutActor) onFailure(m *messages.Failure) bool {
	c := a.c
	if !c.in.current(m.Epoch) {
		return false
	}
	c.in.ended = true
	if c.readingAhead() {
		c.aheadFail = m
	} else {
		for i := range c.outs {
			c.outs[i].fail = m
		}
	}
	return true
}

// take routes an item of the lanes' pass, in steps when partial steps are
// dropped.
func (a *fanoutActor) take(item *messages.Batch) {
	c := a.c
	if !c.dropPartial {
		a.route(item)
		return
	}
	c.step = append(c.step, item)
	if len(c.step) == len(c.outs) {
		for _, b := range c.step {
			a.route(b)
		}
		c.step = nil
	}
}

// end closes the lanes' pass after upstream's End.
func (a *fanoutActor) end(m *messages.End) {
	c := a.c
	c.skipped += m.Skipped
	for _, b := range c.step {
		c.pipe.discard(b)
	}
	c.step = nil
	for i := range c.outs {
		c.outs[i].end = &messages.End{Pass: c.pass, Count: c.outs[i].produced(), Skipped: c.skipped}
	}
}

// switchToAhead starts the lanes on the pass read ahead: its items are
// routed now, and its end or failure, if it came, closes the lanes.
func (a *fanoutActor) switchToAhead() {
	c := a.c
	items, end, fail := c.ahead, c.aheadEnd, c.aheadFail
	c.ahead, c.aheadEnd, c.aheadFail = nil, nil, nil
	c.pipe.ahead.Add(-int64(len(items)))
	for _, b := range items {
		a.take(b)
	}
	switch {
	case fail != nil:
		for i := range c.outs {
			c.outs[i].fail = fail
		}
	case end != nil:
		a.end(end)
	}
}

// dropAhead forgets a pass read ahead that nobody asked for.
func (a *fanoutActor) dropAhead() {
	c := a.c
	for _, b := range c.ahead {
		c.pipe.discard(b)
	}
	c.pipe.ahead.Add(-int64(len(c.ahead)))
	c.ahead, c.aheadEnd, c.aheadFail = nil, nil, nil
}

func (a *fanoutActor) route(b *messages.Batch) {
	c := a.c
	c.outs[c.routed%uint64(len(c.outs))].push(b)
	c.meter.items.Add(1)
	c.routed++
}

// room counts how many of the next items (in routing order, after those
// already demanded) fit their lane's window; reading ahead, how many fit
// the window of all lanes.
func (a *fanoutActor) room() int {
	c := a.c
	if c.readingAhead() {
		return len(c.outs)*c.window - len(c.ahead) - int(max(c.in.outstanding, 0))
	}
	n := uint64(len(c.outs))
	planned := make([]int, n)
	out := int(max(c.in.outstanding, 0))
	k := c.routed + uint64(len(c.step))
	limit := out + int(n)*c.window
	for j := 0; j < limit; j++ {
		lane := (k + uint64(j)) % n
		// Items already demanded land first; past them, an item fits
		// only where its lane has room.
		if j >= out && c.outs[lane].unsent()+planned[lane]+len(c.step)/int(n) >= c.window {
			return j
		}
		planned[lane]++
	}
	return limit
}

func (a *fanoutActor) fail(send func(*actor.PID, any), err error) {
	c := a.c
	c.pipe.record(c.name, err)
	f := failure(c.name, "", -1, err)
	for i := range c.outs {
		c.outs[i].fail = f
		c.outs[i].flush(send)
	}
	c.in.ended = true
}
