package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
)

// fanoutCell is what the double-buffer stage persists: one outlet (a
// prefetch window) per consumer lane. Item k of a pass goes to lane k mod n,
// so which device gets which batch is fixed by the data order alone.
type fanoutCell struct {
	cell
	in          inlet
	outs        []outlet
	window      int  // prefetch per lane
	dropPartial bool // drop the last step when it has fewer than n items
	pass        uint32
	running     bool
	routed      uint64            // items routed this pass
	step        []*messages.Batch // dropPartial: the step being assembled
	skipped     uint64
}

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
	switch m := msg.(type) {
	case *actor.Started:
		if c.restarted() {
			c.in.reopen(send, a.room())
			c.announce(send)
		}
		return
	case *messages.Subscribe:
		if int(m.Lane) >= len(c.outs) {
			a.fail(send, errLane(m.Lane, len(c.outs)))
			return
		}
		o := &c.outs[m.Lane]
		if o.sub != nil && m.Epoch <= o.epoch && m.Pass == c.pass {
			return
		}
		if !c.running || m.Pass != c.pass {
			c.pass, c.running, c.routed, c.step, c.skipped = m.Pass, true, 0, nil, 0
			for i := range c.outs {
				c.outs[i].reset(m.Pass)
			}
			c.in.subscribe(send, m.Pass, 0, 0)
		}
		if err := o.subscribe(ctx.Sender(), m); err != nil {
			a.fail(send, err)
			return
		}
	case *messages.Demand:
		for i := range c.outs {
			if c.outs[i].epoch == m.Epoch && c.outs[i].sub.Equal(ctx.Sender()) {
				if err := c.outs[i].onDemand(m); err != nil {
					a.fail(send, err)
					return
				}
			}
		}
	case *messages.Cancel:
		return // a lane's consumer left; the others go on
	case *messages.Resubscribe:
		c.in.reopen(send, a.room())
		return
	case *messages.Batch:
		if !c.in.admit(send, m.Epoch, m.Seq, a.room()) {
			return
		}
		c.in.commit()
		item := &messages.Batch{Pass: c.pass, Slots: m.Slots, Parts: m.Parts, Ids: m.Ids}
		if c.dropPartial {
			c.step = append(c.step, item)
			if len(c.step) == len(c.outs) {
				for _, b := range c.step {
					a.route(b)
				}
				c.step = nil
			}
		} else {
			a.route(item)
		}
	case *messages.End:
		if !c.in.admitEnd(send, m, a.room()) {
			return
		}
		c.in.ended = true
		c.skipped += m.Skipped
		for _, b := range c.step {
			c.pipe.noteDropped(b)
		}
		c.step = nil
		for i := range c.outs {
			c.outs[i].end = &messages.End{Pass: c.pass, Count: c.outs[i].produced(), Skipped: c.skipped}
		}
	case *messages.Failure:
		if !c.in.current(m.Epoch) {
			return
		}
		c.in.ended = true
		for i := range c.outs {
			c.outs[i].fail = m
		}
	default:
		return
	}
	for i := range c.outs {
		c.outs[i].flush(send)
	}
	c.in.replenish(send, a.room(), c.in.next)
}

func (a *fanoutActor) route(b *messages.Batch) {
	c := a.c
	c.outs[c.routed%uint64(len(c.outs))].push(b)
	c.meter.items.Add(1)
	c.routed++
}

// room counts how many of the next items (in routing order, after those
// already demanded) fit their lane's window.
func (a *fanoutActor) room() int {
	c := a.c
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
