package protocol

import (
	"math"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

// bodies are the messages in box, in order, without their addresses.
func bodies(box *Outbox) []any {
	out := make([]any, 0, len(box.msgs))
	for _, e := range box.msgs {
		out = append(out, e.msg)
	}
	return out
}

// batches counts the batches in box.
func batches(box *Outbox) int {
	n := 0
	for _, e := range box.msgs {
		if _, ok := e.msg.(*messages.Batch); ok {
			n++
		}
	}
	return n
}

// last is the last message in box.
func last(box *Outbox) any { return box.msgs[len(box.msgs)-1].msg }

func TestOutletFollowsTheProtocol(t *testing.T) {
	var o Outlet
	o.Reset(0)
	for range 5 {
		o.Push(&messages.Batch{})
	}
	sub := actor.NewPID("local", "sub")
	require.NoError(t, o.Subscribe(sub, &messages.Subscribe{Epoch: 1, Demand: 2}))
	var out Outbox
	o.Flush(&out)
	require.Equal(t, 2, batches(&out), "never more than demanded")

	require.ErrorIs(t, o.OnDemand(&messages.Demand{Epoch: 1, N: 0}), ErrProtocol)
	require.ErrorIs(t, o.OnDemand(&messages.Demand{Epoch: 1, N: -3}), ErrProtocol)
	require.NoError(t, o.OnDemand(&messages.Demand{Epoch: 0, N: 100}), "old epochs are ignored")
	o.Flush(&out)
	require.Equal(t, 2, batches(&out))

	require.NoError(t, o.OnDemand(&messages.Demand{Epoch: 1, N: math.MaxInt64, Ack: 2}))
	require.NoError(t, o.OnDemand(&messages.Demand{Epoch: 1, N: math.MaxInt64}))
	require.EqualValues(t, math.MaxInt64, o.demand, "demand saturates")
	require.EqualValues(t, 2, o.Base, "acknowledged items are forgotten")

	o.End = &messages.End{Count: 5}
	o.Flush(&out)
	require.Equal(t, 5, batches(&out))
	require.IsType(t, &messages.End{}, last(&out))
	o.Push(&messages.Batch{})
	n := len(out.msgs)
	o.Flush(&out)
	require.Len(t, out.msgs, n, "nothing after End on the epoch")

	require.ErrorIs(t, o.Subscribe(sub, &messages.Subscribe{Epoch: 2, From: 1}), ErrProtocol, "item 1 was forgotten")
	require.NoError(t, o.Subscribe(sub, &messages.Subscribe{Epoch: 2, From: 3, Demand: 10}))
	o.Flush(&out)
	require.Equal(t, 5+3, batches(&out), "a new epoch replays from its from")
}

// Every publisher with one subscriber (open_files, the decorators, the
// merge stage, the service client) sorts a Subscribe by classify: an
// epoch no newer than the link's is stale, the pass it serves resumes,
// anything else starts a pass.
func TestOutletClassifiesSubscriptions(t *testing.T) {
	var o Outlet
	o.Reset(4)
	sub := actor.NewPID("local", "sub")
	require.Equal(t, freshSub, o.classify(&messages.Subscribe{Epoch: 1, Pass: 4}), "the first subscription starts its pass")
	require.NoError(t, o.Subscribe(sub, &messages.Subscribe{Epoch: 5, Pass: 4}))
	for _, c := range []struct {
		epoch uint64
		pass  uint32
		want  subscription
	}{
		{4, 4, staleSub}, {5, 4, staleSub}, {5, 9, staleSub}, // no newer than the link
		{6, 4, resumeSub},                  // a restarted subscriber, same pass
		{6, 5, freshSub}, {9, 0, freshSub}, // Reset, or multi-pass
	} {
		require.Equal(t, c.want, o.classify(&messages.Subscribe{Epoch: c.epoch, Pass: c.pass}), "epoch %d pass %d", c.epoch, c.pass)
	}
	for _, c := range []struct {
		epoch uint64
		want  OutletEvent
	}{{4, outletIgnored}, {5, OutletCancel}, {5, outletIgnored}} { // an old epoch's, then twice
		ev, err := o.Step(sub, &messages.Cancel{Epoch: c.epoch})
		require.NoError(t, err)
		require.Equal(t, c.want, ev, "Cancel of epoch %d", c.epoch)
	}
}

func TestInletTakesItemsInOrder(t *testing.T) {
	in := Inlet{Window: 4, Pub: actor.NewPID("local", "pub")}
	var out Outbox
	in.Subscribe(&out, 0, 0, 4)
	require.Equal(t, stale, in.check(0, 0), "old epoch")
	require.Equal(t, gap, in.check(1, 1))
	require.True(t, in.Admit(&out, 1, 0, 4))
	in.Commit()
	require.Equal(t, stale, in.check(1, 0), "duplicate")
	require.False(t, in.Admit(&out, 1, 2, 4), "a gap re-subscribes")
	last := last(&out).(*messages.Subscribe)
	require.EqualValues(t, 2, last.Epoch)
	require.EqualValues(t, 1, last.From)
}

// Cancel closes the downstream link and cancels the upstream one, once: a
// second Cancel, or one of an old epoch, changes nothing.
func TestCancelIsIdempotent(t *testing.T) {
	var r Relay
	r.In.Pub = actor.NewPID("local", "up")
	r.In.Window = 4
	var out Outbox
	r.In.Subscribe(&out, 0, 0, 4)
	r.Out.Reset(0)
	require.NoError(t, r.Out.Subscribe(actor.NewPID("local", "down"), &messages.Subscribe{Epoch: 3, Demand: 1}))
	drain(&out)

	res, err := r.onLink(&out, nil, &messages.Cancel{Epoch: 2}, 4, nil)
	require.NoError(t, err)
	require.Equal(t, handled, res)
	require.Empty(t, out.msgs, "an old epoch's Cancel")
	require.False(t, r.Out.Closed)

	for range 2 {
		res, err = r.onLink(&out, nil, &messages.Cancel{Epoch: 3}, 4, nil)
		require.NoError(t, err)
		require.Equal(t, handled, res)
	}
	require.True(t, r.Out.Closed)
	require.True(t, r.In.Ended)
	require.Equal(t, []any{&messages.Cancel{Epoch: r.In.epoch}}, bodies(&out), "upstream cancelled once")

	r.Out.Push(&messages.Batch{})
	drain(&out)
	r.Out.Flush(&out)
	require.Empty(t, out.msgs, "nothing sent on a cancelled link")
}

// A stage asks in halves of what it can take: a stage full but for one
// item does not ask for items one at a time, even with nothing outstanding.
func TestInletAsksInHalvesOfItsReach(t *testing.T) {
	in := Inlet{Window: 8, Reach: 4, Pub: actor.NewPID("local", "pub")}
	var out Outbox
	in.Subscribe(&out, 0, 0, 4)
	require.EqualValues(t, 4, in.Outstanding, "the window, as far as the stage reaches")
	for range 4 { // four items arrive; the stage sends none of them on yet
		require.True(t, in.Admit(&out, in.epoch, in.next, 0))
		in.Commit()
	}
	require.Zero(t, in.Outstanding)
	in.Replenish(&out, 1, in.next)
	require.Len(t, out.msgs, 1, "one item of room is less than half the reach: wait for more")
	in.Replenish(&out, 2, in.next)
	require.Len(t, out.msgs, 2)
	d := out.msgs[1].msg.(*messages.Demand)
	require.EqualValues(t, 2, d.N)
	require.EqualValues(t, 4, d.Ack)
	in.Replenish(&out, 3, in.next)
	require.Len(t, out.msgs, 2, "one more with two outstanding: wait")
	in.Replenish(&out, 4, in.next)
	require.Len(t, out.msgs, 3)
	require.EqualValues(t, 2, out.msgs[2].msg.(*messages.Demand).N)
}

// Whatever its window and reach, a stage with nothing outstanding and
// nothing held asks for something: the rule that holds small top-ups back
// never stalls a link (see replenish).
func TestInletAlwaysAsksWhenTheStageIsEmpty(t *testing.T) {
	for window := int64(1); window <= 9; window++ {
		for reach := int64(0); reach <= 9; reach++ {
			in := Inlet{Window: window, Reach: reach, Open: true, Pub: actor.NewPID("local", "pub")}
			room := int(reach)
			if reach == 0 {
				room = int(window) // no reach: the window bounds the room
			}
			var out Outbox
			in.Replenish(&out, room, 0)
			require.Len(t, out.msgs, 1, "window %d, reach %d", window, reach)
			require.EqualValues(t, min(window, int64(room)), out.msgs[0].msg.(*messages.Demand).N)
		}
	}
}

// A Demand that acknowledges items not sent yet breaks the protocol: the
// outlet would forget them and have nothing to send them from. (It
// indexed before its items and panicked; found by FuzzRelayMachine.)
func TestOutletRefusesAnAckOfItemsNotSent(t *testing.T) {
	var o Outlet
	o.Reset(0)
	for range 3 {
		o.Push(&messages.Batch{})
	}
	require.NoError(t, o.Subscribe(down, &messages.Subscribe{Epoch: 1, Demand: 1}))
	var out Outbox
	o.Flush(&out)
	require.ErrorIs(t, o.OnDemand(&messages.Demand{Epoch: 1, N: 1, Ack: 2}), ErrProtocol)
	require.NoError(t, o.OnDemand(&messages.Demand{Epoch: 1, N: 2, Ack: 1}))
	o.Flush(&out)
	require.Equal(t, 3, batches(&out))
}

// An item past the credit its inlet granted is dropped: taking it would
// overdraw the credit.
func TestInletDropsItemsPastItsCredit(t *testing.T) {
	in := Inlet{Window: 2, Pub: up}
	var out Outbox
	in.Subscribe(&out, 0, 0, 1)
	require.True(t, in.Admit(&out, 1, 0, 1))
	in.Commit()
	require.Equal(t, stale, in.check(1, 1), "nothing more was demanded")
	require.Zero(t, in.Outstanding)
}

// A Subscribe to the pass of a cancelled link begins the pass again: the
// stage cancelled its own upstream links, and resuming over them would wait
// forever. (The merge stage failed with "lane 0 ended before item 2";
// found by FuzzMergeMachine.)
func TestACancelledLinkBeginsItsPassAgain(t *testing.T) {
	var o Outlet
	o.Reset(0)
	require.NoError(t, o.Subscribe(down, &messages.Subscribe{Epoch: 1}))
	require.Equal(t, resumeSub, o.classify(&messages.Subscribe{Epoch: 2}))
	ev, err := o.Step(down, &messages.Cancel{Epoch: 1})
	require.NoError(t, err)
	require.Equal(t, OutletCancel, ev)
	require.Equal(t, freshSub, o.classify(&messages.Subscribe{Epoch: 2}))
}

// A subscription for a new pass that breaks the protocol changes nothing:
// the outlet once forgot its pass before it refused it, while the stage,
// which begins a pass only when the outlet says so, kept its state of the
// last one, and its next items went out under the wrong numbers. (Found
// by FuzzXMapMachine.)
func TestOutletRefusesABadNewPassWhole(t *testing.T) {
	var o Outlet
	o.Reset(0)
	o.Push(&messages.Batch{})
	require.NoError(t, o.Subscribe(down, &messages.Subscribe{Epoch: 1, Demand: 1}))
	for _, m := range []*messages.Subscribe{{Epoch: 2, Pass: 1, From: 2}, {Epoch: 2, Pass: 1, Demand: -1}} {
		_, err := o.Step(down, m)
		require.ErrorIs(t, err, ErrProtocol)
		require.EqualValues(t, 0, o.Pass, "the pass is kept")
		require.Equal(t, 1, o.Held(), "and its items")
	}
}
