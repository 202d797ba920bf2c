package protocol

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

// An xmap stage that took its upstream's End keeps its inlet open until its
// workers' last results are pushed. If the upstream restarts then, the link
// is opened again and the End replayed; its skipped records count once.
// (They counted twice: found by sim seed 204975, "skipped 2 records in the
// last pass, 1 are damaged".)
func TestXMapCountsAReplayedEndOnce(t *testing.T) {
	c := NewXMapMachine("xmap", 4, false, 2, 2)
	c.In.Pub = actor.NewPID("local", "shuffle")
	var out Outbox
	c.In.Subscribe(&out, 0, 0, c.room())
	c.inflight = map[uint64]*messages.Batch{0: {}} // a result still to come

	require.True(t, c.onItem(&out, &messages.End{Epoch: c.In.epoch, Skipped: 3}))
	require.False(t, c.In.Ended, "the inlet ends once every result is pushed")
	c.In.Reopen(&out, c.room()) // the upstream restarted and asked for it
	require.EqualValues(t, 2, c.In.epoch)
	require.False(t, c.onItem(&out, &messages.End{Epoch: c.In.epoch, Skipped: 3}), "the same End again")
	require.EqualValues(t, 3, c.skipped)
}
