package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// loader is the Python loader's side of a feed, in Go: the socket, the
// ring it was sent, and the lines that came.
type loader struct {
	t     *testing.T
	c     *net.UnixConn
	r     *bufio.Reader
	mem   []byte
	hello helloLine
}

// startFeed runs feed over a socket pair with the flags of o, as the
// Python loader does; the returned channel gives runFeed's result.
func startFeed(t *testing.T, o feedOptions) (*loader, chan error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	ours := os.NewFile(uintptr(fds[0]), "ours")
	c, err := net.FileConn(ours)
	require.NoError(t, err)
	ours.Close()
	o.fd = fds[1]
	done := make(chan error, 1)
	go func() {
		// runFeed closes fds[1], as it does the descriptor it inherits.
		done <- runFeed(testutil.Context(t), strings.NewReader(""), o, func(string) bool { return false })
	}()
	return &loader{t: t, c: c.(*net.UnixConn), r: bufio.NewReader(c)}, done
}

// start takes the ring and hello, as the first message.
func (l *loader) start() {
	b, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := l.c.ReadMsgUnix(b, oob)
	require.NoError(l.t, err)
	require.Equal(l.t, "R", string(b[:n]))
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	require.NoError(l.t, err)
	fds, err := unix.ParseUnixRights(&msgs[0])
	require.NoError(l.t, err)
	defer unix.Close(fds[0])
	require.NoError(l.t, json.Unmarshal(l.line(), &l.hello))
	l.mem, err = unix.Mmap(fds[0], 0, l.hello.Slots*l.hello.SlotBytes, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(l.t, err)
	l.t.Cleanup(func() { unix.Munmap(l.mem) })
}

func (l *loader) line() []byte {
	b, err := l.r.ReadBytes('\n')
	require.NoError(l.t, err)
	return b
}

// next is the next message and the state after it.
func (l *loader) next() (map[string]any, []byte) {
	var m map[string]any
	require.NoError(l.t, json.Unmarshal(l.line(), &m))
	return m, l.line()
}

// ids reads a batch's ids out of its slot.
func (l *loader) ids(m map[string]any) []uint64 {
	slot := l.mem[int(m["slot"].(float64))*l.hello.SlotBytes:]
	at, rows := int(m["ids"].(float64)), int(m["rows"].(float64))
	out := make([]uint64, rows)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(slot[at+8*i:])
	}
	return out
}

func feedFlags(paths []string) feedOptions {
	return feedOptions{run: runOptions{data: paths, batch: 16, shuffle: 40, seed: 3, world: 1, remainder: "drop", onCorrupt: "fail", credit: 1},
		slots: 2, epochs: 2}
}

// The loader gets every record of each epoch once, in slots it gives
// back, then the end of each epoch and of the feed; feed then returns.
func TestFeedSendsEpochsThroughTheRing(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 100, 30)
	l, done := startFeed(t, feedFlags(paths))
	l.start()
	require.Equal(t, []string{"part-0.rio", "part-1.rio"}, l.hello.Files)
	for epoch := range 2 {
		m, _ := l.next()
		require.Equal(t, "epoch", m["op"])
		require.EqualValues(t, epoch, m["epoch"])
		require.EqualValues(t, 13, m["batches"])
		require.EqualValues(t, 13, m["whole_batches"])
		seen := map[uint64]bool{}
		for m, _ = l.next(); m["op"] == "batch"; m, _ = l.next() {
			for _, id := range l.ids(m) {
				require.False(t, seen[id], "id %d twice", id)
				seen[id] = true
				f, r := messages.SplitID(id)
				require.True(t, f < 2 && r < 100)
			}
			// After the last batches, feed may have ended: the write fails then.
			fmt.Fprintf(l.c, "r %d\n", int(m["slot"].(float64)))
		}
		require.Equal(t, "end", m["op"])
		require.Len(t, seen, 200)
	}
	m, _ := l.next()
	require.Equal(t, "done", m["op"])
	require.NoError(t, <-done)
	l.c.Close()
}

// With --metrics-addr the feed serves its pipeline's metrics while it
// runs, at the address its hello line names.
func TestFeedServesMetrics(t *testing.T) {
	o := feedFlags(testutil.WriteFiles(t, 1, 100, 30))
	o.metricsAddr = "127.0.0.1:0"
	l, done := startFeed(t, o)
	l.start()
	require.NotEmpty(t, l.hello.Metrics)
	resp, err := http.Get("http://" + l.hello.Metrics + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), "actorfeed_stage_items_total")
	l.c.Close()
	require.NoError(t, <-done)
	_, err = http.Get("http://" + l.hello.Metrics + "/metrics")
	require.Error(t, err, "served only while the feed runs")
}

// A loader that gives back a slot it does not hold breaks the protocol:
// feed stops, saying so, rather than hand one slot out twice.
func TestFeedRefusesASlotNotHeld(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 100, 30)
	l, done := startFeed(t, feedFlags(paths))
	l.start()
	l.next() // the epoch
	l.next() // batch 0, in a slot
	_, err := l.c.Write([]byte("r 1\nr 1\n"))
	require.NoError(t, err)
	err = <-done
	require.ErrorContains(t, err, "slot 1")
	var m map[string]any
	for m = nil; m == nil || m["op"] != "error"; {
		require.NoError(t, json.Unmarshal(l.line(), &m))
	}
	require.Contains(t, m["message"], "does not hold")
	l.c.Close()
}

// A loader that goes away ends the feed, even while the feed waits for a
// slot: it returns nil, the end the loader chose.
func TestFeedEndsWhenTheLoaderCloses(t *testing.T) {
	paths := testutil.WriteFiles(t, 2, 100, 30)
	o := feedFlags(paths)
	o.epochs = 0
	l, done := startFeed(t, o)
	l.start()
	l.next()
	l.next()
	l.next() // both slots out: feed waits
	l.c.Close()
	require.NoError(t, <-done)
}

// Ring sizes are checked before anything is mapped.
func TestRingSizesAreChecked(t *testing.T) {
	_, _, err := newRing(1, 4096)
	require.ErrorContains(t, err, "--slots 1")
	_, _, err = newRing(8, 1<<40)
	require.ErrorContains(t, err, "at most")
	_, _, err = newRing(8, 100)
	require.ErrorContains(t, err, "at least 4096")
	_, err = loaderConn(1 << 20)
	require.ErrorContains(t, err, "--fd 1048576")
}

// A loader that sends endless bytes is refused once a line passes a
// bound, not read into memory without end.
func TestFeedRefusesAnEndlessLine(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 100, 30)
	l, done := startFeed(t, feedFlags(paths))
	l.start()
	go func() {
		junk := []byte(strings.Repeat("r", 1<<16))
		for range 4 {
			if _, err := l.c.Write(junk); err != nil {
				return
			}
		}
	}()
	require.ErrorContains(t, <-done, "a line of more than")
	l.c.Close()
}

// A batch of sequences puts its data, its LoD levels (int64 offsets) and
// its ids where its description says, each on a cache line.
func TestRingPutsSequencesWhereItSays(t *testing.T) {
	r, fd, err := newRing(2, 4096)
	require.NoError(t, err)
	unix.Close(fd)
	defer r.close()
	data, err := tensor.FromSlice(tensor.Shape{5, 1}, []float32{1, 2, 3, 4, 5})
	require.NoError(t, err)
	seqs, err := tensor.NewLoDTensor(data, tensor.LoD{{0, 2, 5}})
	require.NoError(t, err)
	d, err := r.put(1, actors.Item{Slots: tensor.Slots{seqs}, IDs: []uint64{7, 9}})
	require.NoError(t, err)
	slot := r.mem[4096:]
	require.Equal(t, []uint64{7, 9}, []uint64{binary.LittleEndian.Uint64(slot[d.IDs:]), binary.LittleEndian.Uint64(slot[d.IDs+8:])})
	a := d.Arrays[0]
	require.Equal(t, "float32", a.DType)
	require.Equal(t, []int{5, 1}, a.Shape)
	require.Equal(t, data.Bytes(), slot[a.Offset:a.Offset+20])
	require.Len(t, a.LoD, 1)
	require.Equal(t, 3, a.LoD[0].Len)
	for i, want := range []uint64{0, 2, 5} {
		require.Equal(t, want, binary.LittleEndian.Uint64(slot[a.LoD[0].Offset+8*i:]))
	}
	for _, off := range []int{d.IDs, a.Offset, a.LoD[0].Offset} {
		require.Zero(t, off%ringAlign)
	}
	_, err = r.put(0, actors.Item{Slots: tensor.Slots{seqs}, IDs: make([]uint64, 600)})
	require.ErrorContains(t, err, "slot_bytes=")
}

// Damaged data ends the feed with an error line that names the file and
// its format, without the CLI's advice (a flag): the loader gives its own.
func TestFeedSaysDataIsDamaged(t *testing.T) {
	paths := testutil.WriteFiles(t, 1, 100, 30)
	b, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(paths[0], b, 0o644))
	l, done := startFeed(t, feedFlags(paths))
	first, err := l.r.ReadByte() // R, with the ring's descriptor, which this drops; or E
	require.NoError(t, err)
	require.Contains(t, "RE", string(first))
	var m map[string]any
	for m = nil; m == nil || m["op"] != "error"; {
		require.NoError(t, json.Unmarshal(l.line(), &m))
	}
	require.Error(t, <-done)
	require.Contains(t, m["message"], paths[0])
	require.NotContains(t, m["message"], "--on-corrupt")
	require.Equal(t, "recordio", m["damaged"])
	l.c.Close()
}
