package protocol

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

// The machines' tests drive a stage's protocol with messages from its
// subscriber (down) and its publishers (up, or one per lane) and read back
// what it decided to send, with no actor in between.
var (
	down = actor.NewPID("local", "down")
	up   = actor.NewPID("local", "up")
)

// drain returns what a step put in box and empties it, as the actor's
// post would send it.
func drain(box *Outbox) []envelope {
	out := box.msgs
	box.msgs = nil
	return out
}

// restart stands for a new instance's start after a crash in the tables.
type restart struct{}

// pairLogic joins the ids of its input items two by two (the last alone) and
// reads passes upstream passes per pass, as a multi-pass stage does: a logic
// that holds items between steps, so that a new pass must forget them.
type pairLogic struct {
	passes   uint32
	pass, at uint32 // the downstream pass, and the upstream pass it reads
	pending  []uint64
}

func (l *pairLogic) Start(pass uint32) {
	l.pass, l.at, l.pending = pass, l.UpstreamPass(pass), nil
}

func (l *pairLogic) UpstreamPass(pass uint32) uint32 { return pass * l.passes }

func (l *pairLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	l.pending = append(l.pending, b.Ids...)
	if len(l.pending) < 2 {
		return nil, nil
	}
	out := &messages.Batch{Pass: l.pass, Ids: l.pending}
	l.pending = nil
	return []*messages.Batch{out}, nil
}

func (l *pairLogic) Finish() ([]*messages.Batch, uint32, bool, error) {
	var out []*messages.Batch
	if len(l.pending) > 0 {
		out = append(out, &messages.Batch{Pass: l.pass, Ids: l.pending})
		l.pending = nil
	}
	if l.at+1 < (l.pass+1)*l.passes {
		l.at++
		return out, l.at, true, nil
	}
	return out, 0, false, nil
}

func newPairRelay(window, capacity int, passes uint32) *RelayMachine {
	m := &RelayMachine{Relay: Relay{Name: "pairs", Capacity: capacity}, Logic: &pairLogic{passes: max(passes, 1)}}
	m.In.Window, m.In.Reach, m.In.Pub = int64(window), int64(capacity), up
	return m
}

// show writes a message the way the tables expect it.
func show(e envelope) string {
	to := "?"
	if e.to != nil {
		to = e.to.Id
	}
	switch m := e.msg.(type) {
	case *messages.Subscribe:
		return fmt.Sprintf("%s subscribe e%d p%d from %d n%d", to, m.Epoch, m.Pass, m.From, m.Demand)
	case *messages.Demand:
		return fmt.Sprintf("%s demand e%d n%d ack %d", to, m.Epoch, m.N, m.Ack)
	case *messages.Cancel:
		return fmt.Sprintf("%s cancel e%d", to, m.Epoch)
	case *messages.Batch:
		return fmt.Sprintf("%s batch e%d #%d %v", to, m.Epoch, m.Seq, m.Ids)
	case *messages.End:
		return fmt.Sprintf("%s end e%d p%d count %d", to, m.Epoch, m.Pass, m.Count)
	case *messages.Failure:
		return fmt.Sprintf("%s failure e%d", to, m.Epoch)
	case *messages.Resubscribe:
		return fmt.Sprintf("%s resubscribe", to)
	case *messages.Assign:
		return fmt.Sprintf("%s assign e%d f%d from %d", to, m.Epoch, m.File, m.From)
	}
	return fmt.Sprintf("%s %T", to, e.msg)
}

// stepRow is one event of a table and the messages it must send.
type stepRow struct {
	what string
	from *actor.PID
	msg  any // restart{} for a restart
	want []string
}

func runTable(t *testing.T, m Machine, rows []stepRow) {
	t.Helper()
	var box Outbox
	for _, r := range rows {
		if _, ok := r.msg.(restart); ok {
			m.Restarted(&box)
		} else {
			require.NoError(t, m.Step(&box, r.from, r.msg), r.what)
		}
		var got []string
		for _, e := range drain(&box) {
			got = append(got, show(e))
		}
		require.Equal(t, r.want, got, r.what)
	}
}

func item(epoch, seq uint64, ids ...uint64) *messages.Batch {
	return &messages.Batch{Epoch: epoch, Seq: seq, Ids: ids}
}

// The relay's protocol, event by event: credit in halves of the stage's
// reach, a gap or a short End opens the upstream link again from the first
// item not taken in, a restart does too, Cancel goes upstream once, and a
// multi-pass stage reads its upstream passes one after the other.
func TestRelayMachineProtocol(t *testing.T) {
	runTable(t, newPairRelay(4, 2, 2), []stepRow{
		{"a subscription opens the upstream link, as far as the stage reaches", down, &messages.Subscribe{Epoch: 1, Demand: 1},
			[]string{"up subscribe e1 p0 from 0 n2"}},
		{"an item waits for its pair; half the reach is asked again", up, item(1, 0, 10),
			[]string{"up demand e1 n1 ack 1"}},
		{"the pair leaves, as far as demanded", up, item(1, 1, 11),
			[]string{"down batch e1 #0 [10 11]", "up demand e1 n1 ack 2"}},
		{"a gap drops the item and opens the link again from the first missing", up, item(1, 3, 13),
			[]string{"up subscribe e2 p0 from 2 n2"}},
		{"an item of the old epoch is stale", up, item(1, 2, 12), nil},
		{"the item it asked for", up, item(2, 2, 12), []string{"up demand e2 n1 ack 3"}},
		{"an End that counts items not taken in opens the link again", up, &messages.End{Epoch: 2, Count: 4},
			[]string{"up subscribe e3 p0 from 3 n2"}},
		{"a restart lost what it was handling: it asks again", nil, restart{},
			[]string{"up subscribe e4 p0 from 3 n2"}},
		{"the item, and its pair is not demanded yet", up, item(4, 3, 13), nil},
		{"demand takes the held pair", down, &messages.Demand{Epoch: 1, N: 3, Ack: 1},
			[]string{"down batch e1 #1 [12 13]", "up demand e4 n1 ack 4"}},
		{"the upstream pass ends: a multi-pass stage reads the next", up, &messages.End{Epoch: 4, Count: 4},
			[]string{"up subscribe e5 p1 from 0 n2"}},
		{"", up, item(5, 0, 20), []string{"up demand e5 n1 ack 1"}},
		{"the last upstream pass ends: its last item leaves alone, then End", up, &messages.End{Epoch: 5, Count: 1},
			[]string{"down batch e1 #2 [20]", "down end e1 p0 count 3"}},
		{"a resubscription to an old epoch is stale", down, &messages.Subscribe{Epoch: 1, Pass: 1}, nil},
		{"a new pass forgets the last and starts its upstream passes", down, &messages.Subscribe{Epoch: 2, Pass: 1, Demand: 4},
			[]string{"up subscribe e6 p2 from 0 n2"}},
		{"Cancel goes upstream", down, &messages.Cancel{Epoch: 2}, []string{"up cancel e6"}},
		{"once", down, &messages.Cancel{Epoch: 2}, nil},
	})
}

// A restarted subscriber reopens the link from the first item it did not
// take in; the relay replays what it holds, and an item it acknowledged
// cannot be asked for again.
func TestRelayMachineReplaysForARestartedSubscriber(t *testing.T) {
	m := newPairRelay(4, 4, 1)
	runTable(t, m, []stepRow{
		{"", down, &messages.Subscribe{Epoch: 1, Demand: 4}, []string{"up subscribe e1 p0 from 0 n4"}},
		{"", up, item(1, 0, 1), nil},
		{"", up, item(1, 1, 2), []string{"down batch e1 #0 [1 2]", "up demand e1 n2 ack 2"}},
		{"", up, item(1, 2, 3), nil},
		{"", up, item(1, 3, 4), []string{"down batch e1 #1 [3 4]", "up demand e1 n2 ack 4"}},
		{"the subscriber took #0 in, then restarted", down, &messages.Subscribe{Epoch: 2, From: 1, Demand: 4},
			[]string{"down batch e2 #1 [3 4]"}},
	})
	var box Outbox
	err := m.Step(&box, down, &messages.Subscribe{Epoch: 3, From: 0, Demand: 4})
	require.ErrorIs(t, err, ErrProtocol, "#0 was acknowledged and forgotten")
	require.Equal(t, []string{"down failure e2"}, []string{show(drain(&box)[0])}, "the link fails on the epoch it had")
}

// The merge's protocol: batches leave in the deal stage's turn, lane k mod
// K, whatever order the lanes deliver them in.
func TestMergeMachineTakesTheLanesInTurn(t *testing.T) {
	lane0, lane1 := actor.NewPID("local", "lane0"), actor.NewPID("local", "lane1")
	m := NewMergeMachine("merge", []string{"a", "b"}, 2, 4)
	m.Ins[0].Pub, m.Ins[1].Pub = lane0, lane1
	runTable(t, m, []stepRow{
		{"a subscription opens every lane", down, &messages.Subscribe{Epoch: 1, Demand: 8},
			[]string{"lane0 subscribe e2 p0 from 0 n2", "lane1 subscribe e3 p0 from 0 n2"}},
		{"lane 1 is early: its batch waits", lane1, item(3, 0, 1), nil},
		{"lane 0's turn", lane0, item(2, 0, 0),
			[]string{"down batch e1 #0 [0]", "down batch e1 #1 [1]", "lane0 demand e2 n1 ack 1", "lane1 demand e3 n1 ack 1"}},
		{"lane 1's stage restarted: its link opens again from what was taken in", nil, &messages.Resubscribe{Stage: "b"},
			[]string{"lane1 subscribe e5 p0 from 1 n2"}},
		{"lane 0's next", lane0, item(2, 1, 2), []string{"down batch e1 #2 [2]", "lane0 demand e2 n1 ack 2"}},
		{"lane 0 ends; lane 1 has the next turn", lane0, &messages.End{Epoch: 2, Count: 2}, nil},
		{"lane 1 ends too: the pass ends", lane1, &messages.End{Epoch: 5, Count: 1}, []string{"down end e1 p0 count 3"}},
		{"a new pass opens every lane again", down, &messages.Subscribe{Epoch: 2, Pass: 1, Demand: 8},
			[]string{"lane0 subscribe e4 p1 from 0 n2", "lane1 subscribe e7 p1 from 0 n2"}},
		{"Cancel closes every lane", down, &messages.Cancel{Epoch: 2}, []string{"lane0 cancel e4", "lane1 cancel e7"}},
		{"once", down, &messages.Cancel{Epoch: 2}, nil},
	})
}

// The double buffer's protocol: item k of a pass goes to lane k mod n; a
// lane that has not heard of a new pass yet gets nothing of it, and its
// old demand and subscriptions change nothing; the pass after the second
// is read ahead and handed out once a lane asks for it.
func TestFanoutMachineProtocol(t *testing.T) {
	d0, d1 := actor.NewPID("local", "d0"), actor.NewPID("local", "d1")
	m := &FanoutMachine{Name: "buffer", Outs: make([]Outlet, 2), Window: 2, ReadsAhead: true}
	m.In.Window, m.In.Pub = 4, up
	runTable(t, m, []stepRow{
		{"demand before any subscription is nobody's (it panicked)", d1, &messages.Demand{Epoch: 0, N: 1}, nil},
		{"lane 0 begins the pass", d0, &messages.Subscribe{Epoch: 1, Demand: 2},
			[]string{"up subscribe e1 p0 from 0 n0", "up demand e1 n4 ack 0"}},
		{"lane 1 joins it", d1, &messages.Subscribe{Epoch: 1, Demand: 1, Lane: 1}, nil},
		{"item 0 goes to lane 0", up, item(1, 0, 0), []string{"d0 batch e1 #0 [0]"}},
		{"item 1 to lane 1", up, item(1, 1, 1), []string{"d1 batch e1 #0 [1]", "up demand e1 n2 ack 2"}},
		{"item 2 to lane 0", up, item(1, 2, 2), []string{"d0 batch e1 #1 [2]"}},
		{"item 3 waits for lane 1's demand", up, item(1, 3, 3), nil},
		{"lane 0 ends; lane 1 when its item is sent", up, &messages.End{Epoch: 1, Count: 4}, []string{"d0 end e1 p0 count 2"}},
		{"lane 0 begins pass 1 (Reset)", d0, &messages.Subscribe{Epoch: 2, Pass: 1, Demand: 2},
			[]string{"up subscribe e2 p1 from 0 n0", "up demand e2 n4 ack 0"}},
		{"lane 1's demand of pass 0 is ignored (it acknowledged pass 1's items)", d1, &messages.Demand{Epoch: 1, N: 2, Ack: 2}, nil},
		{"pass 1's item 0", up, item(2, 0, 0), []string{"d0 batch e2 #0 [0]"}},
		{"pass 1's item 1 waits for lane 1", up, item(2, 1, 1), nil},
		{"lane 1's old subscription does not take the lanes back to pass 0", d1, &messages.Subscribe{Epoch: 2, Pass: 0, Demand: 2, Lane: 1}, nil},
		{"nor does one of an old epoch", d1, &messages.Subscribe{Epoch: 1, Pass: 1, Demand: 2, Lane: 1}, nil},
		{"lane 1 joins pass 1", d1, &messages.Subscribe{Epoch: 3, Pass: 1, Demand: 2, Lane: 1}, []string{"d1 batch e3 #0 [1]", "up demand e2 n2 ack 2"}},
		{"pass 1 ends: pass 2 is read ahead", up, &messages.End{Epoch: 2, Count: 2},
			[]string{"up subscribe e3 p2 from 0 n4", "d0 end e2 p1 count 1", "d1 end e3 p1 count 1"}},
		{"an item read ahead waits", up, item(3, 0, 0), nil},
		{"lane 0 asks for pass 2: it gets what was read ahead", d0, &messages.Subscribe{Epoch: 3, Pass: 2, Demand: 2},
			[]string{"d0 batch e3 #0 [0]"}},
		{"a subscription under a lane's current epoch is old, whatever pass it names", d1, &messages.Subscribe{Epoch: 3, Pass: 3, Lane: 1}, nil},
	})
}
