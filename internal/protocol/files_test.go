package protocol

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/messages"
)

// namedFiles names the files of the machine tests: open_files never
// reads them, its readers do.
type namedFiles struct{}

func (namedFiles) Name(f int) string { return fmt.Sprint("f", f) }

func newFilesMachine(files, readers, buffer, window int, ordered bool) (*FilesMachine, []*actor.PID) {
	pids := make([]*actor.PID, readers)
	for w := range pids {
		pids[w] = actor.NewPID("local", fmt.Sprint("r", w))
	}
	return &FilesMachine{Name: "open_files", Src: namedFiles{}, Files: files, Workers: pids, Buffer: buffer, Window: window,
		Ordered: ordered}, pids
}

func groupOf(epoch, seq uint64, file uint32, first, count uint64) *messages.Batch {
	b := &messages.Batch{Epoch: epoch, Seq: seq, Source: file, First: first, Count: count}
	for r := first; r < first+count; r++ {
		b.Ids = append(b.Ids, uint64(file)*100+r)
	}
	return b
}

// open_files' protocol: a subscription hands the readers the first files,
// credit goes to them in halves of their window and no further than the
// buffer has room, a file done moves its reader on, groups of an old epoch
// count only where they continue the file, and a restart assigns every
// reader again from the first record not taken in (the credit follows
// the subscriber's new subscription: the runner announces the restart).
func TestFilesMachineProtocol(t *testing.T) {
	m, r := newFilesMachine(3, 2, 4, 2, false)
	runTable(t, m, []stepRow{
		{"a reader restarted before the first pass has nothing to redo (it panicked)", r[0], &messages.Resubscribe{Stage: "r0"}, nil},
		{"a subscription hands out the first files, with credit", down, &messages.Subscribe{Epoch: 1, Demand: 1},
			[]string{"r0 assign e1 f0 from 0", "r1 assign e2 f1 from 0", "r0 demand e1 n2 ack 0", "r1 demand e2 n2 ack 0"}},
		{"a group leaves as demanded", r[0], groupOf(1, 0, 0, 0, 2), []string{"down batch e1 #0 [0 1]", "r0 demand e1 n1 ack 1"}},
		{"a group past the first record not taken in is dropped", r[1], groupOf(2, 0, 1, 1, 1), []string{"r1 demand e2 n1 ack 1"}},
		{"the file's first group waits for demand", r[1], groupOf(2, 1, 1, 0, 1), nil},
		{"an End that does not count what was taken in changes nothing", r[0], &messages.End{Epoch: 1, Count: 3}, nil},
		{"file 0 is done: its reader goes on to file 2", r[0], &messages.End{Epoch: 1, Count: 2}, []string{"r0 assign e3 f2 from 0", "r0 demand e3 n2 ack 0"}},
		{"a restart assigns every reader again from what was taken in", nil, restart{}, []string{"r0 assign e4 f2 from 0", "r1 assign e5 f1 from 1"}},
		{"a group of the old epoch that continues the file counts", r[1], groupOf(2, 2, 1, 1, 1), []string{"r0 demand e4 n2 ack 0"}},
		{"demand takes both groups", down, &messages.Demand{Epoch: 1, N: 4, Ack: 1}, []string{"down batch e1 #1 [100]", "down batch e1 #2 [101]", "r1 demand e5 n2 ack 0"}},
		{"", r[1], &messages.End{Epoch: 5, Count: 2}, nil},
		{"", r[0], groupOf(4, 0, 2, 0, 1), []string{"down batch e1 #3 [200]", "r0 demand e4 n1 ack 1"}},
		{"the last file done ends the pass", r[0], &messages.End{Epoch: 4, Count: 1}, []string{"down end e1 p0 count 4"}},
	})
}

// FuzzFilesMachine plays open_files' subscriber and readers: readers keep
// to their credit and read their files' records, but send groups of old
// epochs, of other files, overlapping or past what was taken in, and Ends
// that miscount, and are assigned again at random. Besides every link's
// invariants (linkFuzz), every pass that ends must have handed on every
// record of every file exactly once, in file order when ordered.
func FuzzFilesMachine(f *testing.F) {
	f.Add([]byte{0, 40, 3, 0, 3, 1, 3, 0, 4, 0, 4, 1, 1, 40}, uint8(2), uint8(1), uint8(2), uint8(1), false)
	f.Add([]byte{0, 40, 3, 0, 3, 1, 7, 0, 3, 1, 4, 1, 3, 0, 4, 0, 1, 40}, uint8(2), uint8(1), uint8(0), uint8(0), true)
	f.Fuzz(func(t *testing.T, ops []byte, files, readers, buffer, window uint8, ordered bool) {
		nf := int(files%4) + 1
		m, pids := newFilesMachine(nf, int(readers%3)+1, int(buffer%4)+1, int(window%3)+1, ordered)
		fz := &filesFuzz{m: m, lens: make([]uint64, nf)}
		for f := range fz.lens {
			fz.lens[f] = uint64(f*7+3)%4 + 1
		}
		for _, pid := range pids {
			fz.readers = append(fz.readers, &readerModel{pid: pid})
		}
		fz.d = newDownModel(down, 0, &m.out)
		fz.links = &linkFuzz{m: m, downs: []*downModel{fz.d}, fresh: func(s *messages.Subscribe) bool { return m.out.classify(s) == freshSub }}
		fz.run(t, ops)
	})
}

type filesFuzz struct {
	m       *FilesMachine
	lens    []uint64 // records in each file
	readers []*readerModel
	d       *downModel
	links   *linkFuzz // for the subscriber's side
}

// readerModel is a reader: its assignment, how far it read, its credit.
type readerModel struct {
	pid                *actor.PID
	epoch, seq, cursor uint64
	prev               uint64 // the assignment before this one
	to                 uint64
	file               uint32
	credit             int64
	assigned           bool
}

func (fz *filesFuzz) run(t *testing.T, ops []byte) {
	var box Outbox
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i]%8, ops[i+1]
		var err error
		switch {
		case op < 3:
			_, err = fz.links.event(&box, op, arg)
		case op == 7:
			fz.m.Restarted(&box)
		default:
			err = fz.reader(&box, op, arg)
		}
		if err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("op %d: an error that is not the protocol's: %v", i, err)
		}
		for _, e := range drain(&box) {
			if msg := fz.deliver(e); msg != "" {
				t.Fatalf("op %d: %s: %s", i, show(e), msg)
			}
		}
		for w, ws := range fz.m.work {
			if ws.outstanding < 0 || ws.outstanding > fz.m.Window {
				t.Fatalf("op %d: reader %d has %d outstanding, window %d", i, w, ws.outstanding, fz.m.Window)
			}
		}
	}
}

// reader makes a reader's message: a group, an End, a failure or a
// resubscription.
func (fz *filesFuzz) reader(box *Outbox, op, arg byte) error {
	r := fz.readers[int(arg)%len(fz.readers)]
	switch op {
	case 3:
		if !r.assigned || r.credit <= 0 || r.cursor >= r.to {
			return nil // a reader keeps to its credit and its file
		}
		n := min(uint64(arg>>6)%2+1, r.to-r.cursor)
		b := groupOf(r.epoch, r.seq, r.file, r.cursor, n)
		switch arg >> 3 % 8 {
		case 1:
			// Read, but late: sent under the reader's last assignment
			// (or none), it counts only where it continues the file.
			b.Epoch = r.prev
			r.cursor += n
		case 2:
			b.Source++ // another file's
		case 3:
			b = groupOf(r.epoch, r.seq, r.file, r.cursor+1, min(n, r.to-r.cursor-1)) // past a record
			if b.Count == 0 {
				return nil
			}
		default:
			r.cursor += n
		}
		r.seq++
		r.credit--
		return fz.m.Step(box, r.pid, b)
	case 4:
		count := r.cursor
		if r.cursor < r.to || arg&8 != 0 {
			count++ // an End that miscounts
		}
		return fz.m.Step(box, r.pid, &messages.End{Epoch: r.epoch, Count: count})
	case 5:
		return fz.m.Step(box, r.pid, &messages.Resubscribe{Stage: r.pid.Id})
	}
	return nil
}

func (fz *filesFuzz) deliver(e envelope) string {
	if e.to == down {
		if msg := fz.links.toDown(fz.d, e.msg); msg != "" {
			return msg
		}
		if end, ok := e.msg.(*messages.End); ok {
			return fz.everyRecordOnce(end)
		}
		return ""
	}
	for _, r := range fz.readers {
		if r.pid == e.to {
			return fz.toReader(r, e.msg)
		}
	}
	return "sent to no one it knows"
}

func (fz *filesFuzz) toReader(r *readerModel, msg any) string {
	switch m := msg.(type) {
	case *messages.Assign:
		if r.epoch >= m.Epoch && r.epoch > 0 {
			return "an assignment's epoch no newer than the last"
		}
		r.prev, r.epoch, r.seq, r.cursor, r.file, r.credit, r.assigned = r.epoch, m.Epoch, 0, m.From, m.File, 0, true
		r.to = m.To
		if r.to == 0 {
			r.to = fz.lens[m.File]
		}
	case *messages.Demand:
		if m.Epoch != r.epoch || m.N <= 0 {
			return "demand for another assignment, or none"
		}
		r.credit += m.N
	case *messages.Cancel:
		r.assigned = false
	default:
		return "not a message for a reader"
	}
	return ""
}

// everyRecordOnce checks a pass that ended: when the subscriber saw all its
// items, they hold every record of every file once.
func (fz *filesFuzz) everyRecordOnce(end *messages.End) string {
	var got []uint64
	for seq := range end.Count {
		ids, ok := fz.d.ids[seq]
		if !ok {
			return "" // the subscriber skipped items: nothing to check
		}
		got = append(got, ids...)
	}
	var want []uint64
	for f, n := range fz.lens {
		for r := range n {
			want = append(want, uint64(f)*100+r)
		}
	}
	if !fz.m.Ordered {
		slices.Sort(got)
	}
	if !slices.Equal(got, want) {
		return fmt.Sprintf("the pass handed on %v, not every record once (%v)", got, want)
	}
	return ""
}

// A subscriber that asks for more groups than the buffer holds gets the
// buffer, and the readers are asked for the rest at once: nothing else may
// prompt open_files later, since the subscriber waits for groups it already
// asked for. (open_files once granted credit before flushing, saw a full
// buffer, and a pipeline with Window 8 hung about once in a hundred passes.)
func TestFilesGrantsReadersWhatItsFlushFreed(t *testing.T) {
	sub, reader := actor.NewPID("local", "sub"), actor.NewPID("local", "reader-0")
	c := &FilesMachine{Workers: []*actor.PID{reader}, Buffer: 3, Window: 8, work: []workerState{{unit: 0, epoch: 7}}}
	c.out.Reset(0)
	for range c.Buffer {
		c.out.Push(&messages.Batch{})
	}
	require.NoError(t, c.out.Subscribe(sub, &messages.Subscribe{Epoch: 1}))
	require.NoError(t, c.out.OnDemand(&messages.Demand{Epoch: 1, N: 5}))

	var box Outbox
	c.settle(&box)
	var toSub, toReader []any
	for _, e := range box.msgs {
		if e.to.Equal(reader) {
			toReader = append(toReader, e.msg)
		} else {
			toSub = append(toSub, e.msg)
		}
	}
	require.Len(t, toSub, 3, "the buffer goes to the subscriber")
	require.Len(t, toReader, 1, "the reader is asked for what that freed")
	d := toReader[0].(*messages.Demand)
	require.EqualValues(t, 7, d.Epoch)
	require.EqualValues(t, 3, d.N, "a buffer's worth")
	require.Equal(t, 3, c.work[0].outstanding)
}
