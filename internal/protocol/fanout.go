package protocol

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// FanoutMachine is the double buffer's protocol: one outlet (a prefetch
// window) per consumer lane. Item k of a pass goes to lane k mod n,
// so which device gets which batch is fixed by the data order alone. The
// deal stage before the lanes (actors/lanes.go) is one too, without reading ahead.
//
// Once its upstream ended a pass (from the second pass on: a pipeline that
// was never reset may never be), the double buffer reads the next pass
// ahead (a window per lane), while its consumers still drain the one that
// ended: the next pass starts from full buffers instead of from an empty
// pipeline. The items read ahead wait in the cell, unrouted, until a
// consumer subscribes to that pass (Reset); a pass nobody asks for is
// dropped with the pipeline. actors.machineActor runs it.
type FanoutMachine struct {
	Name        string
	In          Inlet
	Outs        []Outlet
	Window      int  // prefetch per lane
	DropPartial bool // drop the last step when it has fewer than n items
	ReadsAhead  bool // reads the next pass ahead (the double buffer)
	Deals       bool // deals to lanes, whose counts of skipped records the merge adds
	pass        uint32
	running     bool
	routed      uint64            // items routed this pass
	partial     []*messages.Batch // DropPartial: the step being assembled
	skipped     uint64

	ahead     []*messages.Batch // items of pass+1 read ahead
	aheadEnd  *messages.End     // pass+1 ended while read ahead
	aheadFail *messages.Failure // pass+1 failed while read ahead
	Effects   Effects
}

// readingAhead says whether the inlet reads the pass after the lanes'.
func (c *FanoutMachine) readingAhead() bool { return c.running && c.In.Pass == c.pass+1 }

func (c *FanoutMachine) Restarted(box *Outbox) { c.In.Reopen(box, c.room()) }

func (c *FanoutMachine) Load() (int, int64) {
	held := len(c.partial)
	for i := range c.Outs {
		held += c.Outs[i].Held()
	}
	return held, c.In.Outstanding
}

func (c *FanoutMachine) Step(box *Outbox, from *actor.PID, msg any) error {
	var settle bool // the message may have freed or brought items: flush and ask for more
	var err error
	switch b := msg.(type) {
	case *messages.Subscribe:
		settle, err = c.onSubscribe(box, from, b)
	case *messages.Demand:
		settle, err = c.onDemand(box, from, b)
	case *messages.Cancel:
		// a lane's consumer left; the others go on
	case *messages.Resubscribe:
		c.In.Reopen(box, c.room())
	case *messages.Batch:
		settle = c.onBatch(box, b)
	case *messages.End:
		settle = c.onEnd(box, b)
	case *messages.Failure:
		settle = c.onFailure(b)
	}
	if settle {
		for i := range c.Outs {
			c.Outs[i].Flush(box)
		}
		c.In.Replenish(box, c.room(), c.In.next)
	}
	return err
}

// onSubscribe takes a lane's subscription. One for another pass starts that
// pass: from what was read ahead when it is the pass being read ahead.
func (c *FanoutMachine) onSubscribe(box *Outbox, from *actor.PID, m *messages.Subscribe) (bool, error) {
	if int(m.Lane) >= len(c.Outs) {
		return false, c.fail(box, errLane(m.Lane, len(c.Outs)))
	}
	o := &c.Outs[m.Lane]
	if o.sub != nil && m.Epoch <= o.Epoch || c.running && m.Pass < c.pass {
		// An old request; and as passes only grow (Reset), a lane's
		// subscription for an older one was sent before its consumer
		// heard of the new pass, and would take every lane back to it.
		return false, nil
	}
	if !c.running || m.Pass != c.pass {
		ahead := c.readingAhead() && m.Pass == c.In.Pass
		for _, b := range c.partial {
			c.Effects.drop(b)
		}
		c.pass, c.running, c.routed, c.partial, c.skipped = m.Pass, true, 0, nil, 0
		for i := range c.Outs {
			c.Outs[i].Reset(m.Pass)
		}
		if ahead {
			c.switchToAhead()
		} else {
			c.dropAhead()
			c.In.Subscribe(box, m.Pass, 0, 0)
		}
	}
	if err := o.Subscribe(from, m); err != nil {
		return false, c.fail(box, err)
	}
	return true, nil
}

// onDemand credits the lane that asked; demand on a lane nobody subscribed
// to is nobody's.
func (c *FanoutMachine) onDemand(box *Outbox, from *actor.PID, m *messages.Demand) (bool, error) {
	for i := range c.Outs {
		if c.Outs[i].sub != nil && c.Outs[i].Epoch == m.Epoch && c.Outs[i].sub.Equal(from) {
			if err := c.Outs[i].OnDemand(m); err != nil {
				return false, c.fail(box, err)
			}
		}
	}
	return true, nil
}

// onBatch takes an item in: routed to the lanes, or kept while the next
// pass is read ahead.
func (c *FanoutMachine) onBatch(box *Outbox, m *messages.Batch) bool {
	if !c.In.Admit(box, m.Epoch, m.Seq, c.room()) {
		return false
	}
	c.In.Commit()
	item := &messages.Batch{Pass: c.In.Pass, Slots: m.Slots, Parts: m.Parts, Rows: m.Rows, Ids: m.Ids}
	KeepPlace(item, m)
	if c.readingAhead() {
		c.ahead = append(c.ahead, item)
		c.Effects.readAhead(1)
	} else {
		c.take(item)
	}
	return true
}

// onEnd takes the upstream's end of a pass.
func (c *FanoutMachine) onEnd(box *Outbox, m *messages.End) bool {
	if !c.In.AdmitEnd(box, m, c.room()) {
		return false
	}
	c.In.Ended = true
	if c.readingAhead() {
		c.aheadEnd = m
		return true
	}
	c.end(m)
	// Read the next pass ahead while the consumers drain this one, once the
	// pipeline was reset at least once: a single-pass run would only waste
	// the work.
	if c.pass > 0 && c.ReadsAhead {
		c.In.Subscribe(box, c.pass+1, 0, c.room())
	}
	return true
}

// onFailure passes the upstream's failure to every lane, or keeps it for
// the pass being read ahead.
func (c *FanoutMachine) onFailure(m *messages.Failure) bool {
	if !c.In.Current(m.Epoch) {
		return false
	}
	c.In.Ended = true
	if c.readingAhead() {
		c.aheadFail = m
	} else {
		for i := range c.Outs {
			c.Outs[i].Fail = m
		}
	}
	return true
}

// take routes an item of the lanes' pass, in steps when partial steps are
// dropped.
func (c *FanoutMachine) take(item *messages.Batch) {
	if !c.DropPartial {
		c.route(item)
		return
	}
	c.partial = append(c.partial, item)
	if len(c.partial) == len(c.Outs) {
		for _, b := range c.partial {
			c.route(b)
		}
		c.partial = nil
	}
}

// end closes the lanes' pass after upstream's End.
func (c *FanoutMachine) end(m *messages.End) {
	c.skipped += m.Skipped
	for _, b := range c.partial {
		c.Effects.drop(b)
	}
	c.partial = nil
	for i := range c.Outs {
		skipped := c.skipped
		if c.Deals && i > 0 {
			// Lane 0 carries the count; the merge adds each lane's, which
			// also count the samples their maps dropped.
			skipped = 0
		}
		c.Outs[i].End = &messages.End{Pass: c.pass, Count: c.Outs[i].Produced(), Skipped: skipped}
	}
}

// switchToAhead starts the lanes on the pass read ahead: its items are
// routed now, and its end or failure, if it came, closes the lanes.
func (c *FanoutMachine) switchToAhead() {
	items, end, fail := c.ahead, c.aheadEnd, c.aheadFail
	c.ahead, c.aheadEnd, c.aheadFail = nil, nil, nil
	c.Effects.readAhead(-int64(len(items)))
	for _, b := range items {
		c.take(b)
	}
	switch {
	case fail != nil:
		for i := range c.Outs {
			c.Outs[i].Fail = fail
		}
	case end != nil:
		c.end(end)
	}
}

// dropAhead forgets a pass read ahead that nobody asked for.
func (c *FanoutMachine) dropAhead() {
	for _, b := range c.ahead {
		c.Effects.drop(b)
	}
	c.Effects.readAhead(-int64(len(c.ahead)))
	c.ahead, c.aheadEnd, c.aheadFail = nil, nil, nil
}

func (c *FanoutMachine) route(b *messages.Batch) {
	c.Outs[c.routed%uint64(len(c.Outs))].Push(b)
	c.Effects.made(b)
	c.routed++
}

// room counts how many of the next items (in routing order, after those
// already demanded) fit their lane's window; reading ahead, how many fit
// the window of all lanes.
func (c *FanoutMachine) room() int {
	if c.readingAhead() {
		return len(c.Outs)*c.Window - len(c.ahead) - int(max(c.In.Outstanding, 0))
	}
	n := uint64(len(c.Outs))
	planned := make([]int, n)
	out := int(max(c.In.Outstanding, 0))
	k := c.routed + uint64(len(c.partial))
	limit := out + int(n)*c.Window
	for j := 0; j < limit; j++ {
		lane := (k + uint64(j)) % n
		// Items already demanded land first; past them, an item fits
		// only where its lane has room.
		if j >= out && c.Outs[lane].Unsent()+planned[lane]+len(c.partial)/int(n) >= c.Window {
			return j
		}
		planned[lane]++
	}
	return limit
}

// fail ends every lane's link with err, and returns it.
func (c *FanoutMachine) fail(box *Outbox, err error) error {
	f := Failure(c.Name, "", -1, err)
	for i := range c.Outs {
		c.Outs[i].Fail = f
		c.Outs[i].Flush(box)
	}
	c.In.Ended = true
	return err
}

func errLane(lane uint32, lanes int) error {
	return fmt.Errorf("%w: lane %d of %d", ErrProtocol, lane, lanes)
}
