package protocol

import (
	"testing"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/stretchr/testify/require"
)

// startService is a service machine of workers workers, credit credit,
// one task at a time each, capacity 1 and tasks of 1, 6, 4 and 2 batches
// (the fuzz harness's): subscribed, with every worker in a session.
func startService(t *testing.T, workers, credit uint8) (*serviceFuzz, *Outbox) {
	fz := newServiceFuzz(workers-1, credit-1, 0, 0, 3)
	box := &Outbox{}
	fz.m.Start(box)
	fz.deliver(t, -1, box)
	fz.do(t, box, 0, 0) // subscribe, no demand
	for i := range fz.workers {
		fz.do(t, box, 7, byte(i)) // the probe answers
		fz.do(t, box, 5, byte(i)) // the worker's heartbeat
	}
	return fz, box
}

func TestServiceHandsOnInTheOrderWhateverFinishesFirst(t *testing.T) {
	fz, box := startService(t, 2, 1)
	require.Contains(t, fz.workers[1].attempts, uint64(1), "the second task goes to the second worker")
	fz.do(t, box, 3, 1) // task 1's first batch, before any of task 0's
	fz.do(t, box, 1, 5) // demand
	require.Empty(t, fz.d.seqOf, "task 1's batch waits for task 0's")
	fz.do(t, box, 3, 0)
	fz.do(t, box, 4, 0) // task 0 (one batch) ends
	require.Equal(t, map[uint64]uint64{0: 0, 1: 1}, fz.d.seqOf, "task 0's batch, then task 1's")
}

func TestServiceStartsAnAttemptAgainAfterALostBatch(t *testing.T) {
	fz, box := startService(t, 1, 4)
	fz.do(t, box, 1, 5) // demand
	fz.do(t, box, 3, 0) // task 0's one batch
	fz.do(t, box, 4, 0)
	fz.do(t, box, 3, 0)   // task 1's batch 0
	fz.do(t, box, 3, 128) // batch 1, lost on the way
	fz.do(t, box, 3, 0)   // batch 2: the machine sees the gap
	again := fz.workers[0].attempts[1]
	require.Equal(t, uint32(2), again.attempt, "the task is given again, a new attempt")
	require.Equal(t, uint32(1), again.next, "from the batch after those taken in")
	fz.do(t, box, 1, 5)
	for range 5 {
		fz.do(t, box, 3, 0)
	}
	fz.do(t, box, 4, 0)
	require.Len(t, fz.d.seqOf, 7, "every batch of tasks 0 and 1, once")
}

func TestServiceFailsAWorkerThatSendsPastItsCredit(t *testing.T) {
	fz, box := startService(t, 1, 1)
	fz.do(t, box, 1, 0) // demand for one
	fz.do(t, box, 3, 0)
	fz.do(t, box, 4, 0) // task 0 ends, its batch sent
	a := fz.workers[0].attempts[1]
	for a.next < a.granted {
		fz.do(t, box, 3, 0) // within its credit
	}
	err := fz.event(box, 11, 0) // past it
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "worker w0 sent batch 2 of task 1, past its credit of 2")
	fz.deliver(t, -1, box)
	fz.check(t, -1)
	require.True(t, fz.d.done[fz.d.epoch], "the subscriber is told")
}

func TestServiceFailsOnceNoWorkerAnsweredForTheWait(t *testing.T) {
	fz, box := startService(t, 1, 1)
	fz.do(t, box, 10, 0) // the worker's node is gone
	require.Equal(t, WorkerLost, fz.m.Workers[0].State())
	fz.m.WaitForWorkers = fuzzLease
	var err error
	for range 12 {
		if err = fz.event(box, 6, 7); err != nil { // a lease a tick
			break
		}
		fz.deliver(t, -1, box)
	}
	require.ErrorIs(t, err, ErrNoWorkers)
	fz.deliver(t, -1, box)
	require.True(t, fz.d.done[fz.d.epoch], "the subscriber is told")
}

func TestServiceAnswersAHeartbeatOnlyForAttemptsItCouldHaveGiven(t *testing.T) {
	fz, box := startService(t, 1, 1)
	wm := fz.workers[0]
	hb := &messages.ServiceHeartbeat{Session: wm.session}
	for id := range uint64(10_000) {
		hb.Tasks, hb.Attempts, hb.Sent = append(hb.Tasks, id+100), append(hb.Attempts, 1), append(hb.Sent, 0)
	}
	require.NoError(t, fz.m.Step(box, wm.w.PID, hb))
	require.Equal(t, 5, len(drain(box)), "a drop for each of the pass's 4 tasks and one more, not one for each entry")
}
