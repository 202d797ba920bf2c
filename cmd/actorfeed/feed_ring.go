package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/actors"
)

// The ring's bounds: at least two slots (the batch a trainer steps and the
// next one), at most MaxQueue; a slot at least a page and the ring at most
// maxRingBytes, checked before anything is mapped.
const (
	minSlots     = 2
	ringAlign    = 64 // every array in a slot starts on a cache line
	minSlotBytes = 4096
	maxRingBytes = 64 << 30
)

// ring is the shared memory batches travel in to the Python loader: an
// anonymous memory file (memfd) of slots x slotBytes, handed to the
// loader over the socket. It has no name: nothing is left in /dev/shm
// whichever side dies, and the memory goes once both have unmapped it.
type ring struct {
	mem       []byte
	slotBytes int
	free      chan int // slots the loader gave back: the credit

	mu  sync.Mutex
	out []bool // slots the loader holds
}

// newRing maps slots x slotBytes bytes of an anonymous memory file and
// returns it with the file's descriptor, which the caller sends and
// closes.
func newRing(slots, slotBytes int) (*ring, int, error) {
	if slots < minSlots || slots > actors.MaxQueue {
		return nil, -1, fmt.Errorf("--slots %d: want %d to %d", slots, minSlots, actors.MaxQueue)
	}
	if slotBytes < minSlotBytes || int64(slots)*int64(slotBytes) > maxRingBytes {
		return nil, -1, fmt.Errorf("a ring of %d slots of %d bytes: want slots of at least %d bytes and at most %d bytes in all",
			slots, slotBytes, minSlotBytes, int64(maxRingBytes))
	}
	fd, err := unix.MemfdCreate("actorfeed-ring", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, fmt.Errorf("the batch ring: memfd_create: %w", err)
	}
	size := slots * slotBytes
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("the batch ring: sizing it to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("the batch ring: mapping %d bytes: %w", size, err)
	}
	r := &ring{mem: mem, slotBytes: slotBytes, free: make(chan int, slots), out: make([]bool, slots)}
	for s := range slots {
		r.free <- s
	}
	return r, fd, nil
}

// take waits for a free slot and marks it the loader's.
func (r *ring) take(ctx context.Context) (int, error) {
	select {
	case s := <-r.free:
		r.mu.Lock()
		r.out[s] = true
		r.mu.Unlock()
		return s, nil
	case <-ctx.Done():
		return -1, context.Cause(ctx)
	}
}

// giveBack frees a slot the loader held; a slot it did not hold is a
// protocol error.
func (r *ring) giveBack(s int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s < 0 || s >= len(r.out) || !r.out[s] {
		return fmt.Errorf("the loader gave back slot %d, which it does not hold", s)
	}
	r.out[s] = false
	r.free <- s
	return nil
}

func (r *ring) close() {
	if r != nil {
		unix.Munmap(r.mem)
	}
}

// arrayDesc places one array in a slot: what numpy needs to view it.
type arrayDesc struct {
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int    `json:"offset"`
	// LoD are the slot's sequence offsets, one int64 array a level.
	LoD []lodDesc `json:"lod,omitempty"`
}

type lodDesc struct {
	Offset int `json:"offset"`
	Len    int `json:"len"`
}

// batchDesc is the line that tells the loader a slot holds a batch; the
// line after it is the pipeline's state once the batch is taken, which
// the loader keeps unparsed until it is asked for it.
type batchDesc struct {
	Op      string `json:"op"`
	Slot    int    `json:"slot"`
	Epoch   int    `json:"epoch"`
	Index   int    `json:"index"`
	Padding int    `json:"padding,omitempty"`
	// StepShare is the batch's part of its global step (Item.StepShare),
	// under --global-batch only.
	StepShare float64     `json:"step_share,omitempty"`
	Rows      int         `json:"rows"`
	IDs       int         `json:"ids"` // offset of the uint64 ids
	Arrays    []arrayDesc `json:"arrays"`
}

func alignUp(n int) int { return (n + ringAlign - 1) &^ (ringAlign - 1) }

// itemBytes is the room an item takes in a slot.
func itemBytes(it actors.Item) int {
	n := alignUp(8 * len(it.IDs))
	for _, t := range it.Slots {
		n += alignUp(len(t.Bytes()))
		for _, lvl := range t.LoD {
			n += alignUp(8 * len(lvl))
		}
	}
	return n
}

// put copies it into slot and describes it. An item larger than a slot is
// refused with the size to ask for.
func (r *ring) put(slot int, it actors.Item) (batchDesc, error) {
	if need := itemBytes(it); need > r.slotBytes {
		return batchDesc{}, fmt.Errorf("batch %d of epoch %d is %d bytes, more than a slot's %d: give the loader slot_bytes=%d or more",
			it.Index, it.Epoch, need, r.slotBytes, need)
	}
	mem := r.mem[slot*r.slotBytes : (slot+1)*r.slotBytes]
	d := batchDesc{Op: "batch", Slot: slot, Epoch: it.Epoch, Index: it.Index, Padding: it.Padding, StepShare: it.StepShare,
		Rows: len(it.IDs)}
	off := 0
	place := func(n int) int {
		at := off
		off += alignUp(n)
		return at
	}
	d.IDs = place(8 * len(it.IDs))
	for i, id := range it.IDs {
		binary.LittleEndian.PutUint64(mem[d.IDs+8*i:], id) // numpy's "<u8"
	}
	for _, t := range it.Slots {
		a := arrayDesc{DType: t.DType().String(), Shape: t.Shape(), Offset: place(len(t.Bytes()))}
		copy(mem[a.Offset:], t.Bytes())
		for _, lvl := range t.LoD {
			l := lodDesc{Offset: place(8 * len(lvl)), Len: len(lvl)}
			for i, v := range lvl {
				binary.LittleEndian.PutUint64(mem[l.Offset+8*i:], uint64(v))
			}
			a.LoD = append(a.LoD, l)
		}
		d.Arrays = append(d.Arrays, a)
	}
	return d, nil
}

// feedConn is the loader's socket: lines of JSON out, and in, the slots
// the loader gives back ("r N").
type feedConn struct {
	c       *net.UnixConn
	w       *bufio.Writer
	started bool     // the first byte (R with the ring, or E) is sent
	pending [][]byte // lines written before it, sent after it
	// delivered counts the samples put in the ring, the report's
	// throughput (--report).
	delivered atomic.Int64
}

// errLoaderGone is the cause of a feed's end when the loader closed its
// socket or died: nothing is left to feed.
var errLoaderGone = errors.New("the Python loader closed its socket")

// sendRing sends the ring's descriptor (with one byte, R) and then hello.
func (f *feedConn) sendRing(fd int, hello any) error {
	if _, _, err := f.c.WriteMsgUnix([]byte{'R'}, unix.UnixRights(fd), nil); err != nil {
		return fmt.Errorf("sending the batch ring: %w", err)
	}
	f.started = true
	if err := f.line(hello); err != nil {
		return err
	}
	for _, l := range f.pending {
		f.w.Write(l)
	}
	f.pending = nil
	return nil
}

// line writes v as a JSON line, buffered until flush.
func (f *feedConn) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.raw(b)
}

// raw writes b, a JSON value already encoded, as a line; before the ring
// is sent, it keeps the line for after it.
func (f *feedConn) raw(b []byte) error {
	if !f.started {
		f.pending = append(f.pending, append(slices.Clip(b), '\n'))
		return nil
	}
	f.w.Write(b)
	return f.w.WriteByte('\n')
}

// flush sends what is buffered, once the ring is sent.
func (f *feedConn) flush() error {
	if !f.started {
		return nil
	}
	return f.w.Flush()
}

// takeBack reads the loader's lines until it closes the socket, putting
// the slots it gives back into the ring; it cancels the feed with the
// reason when the loader goes or breaks the protocol. A slot given back
// that was not out is a protocol error.
func (f *feedConn) takeBack(cancel context.CancelCauseFunc, slots *atomic.Pointer[ring]) {
	sc := bufio.NewScanner(f.c)
	for sc.Scan() {
		line := sc.Text()
		n, err := strconv.Atoi(strings.TrimPrefix(line, "r "))
		r := slots.Load()
		if !strings.HasPrefix(line, "r ") || err != nil || r == nil {
			cancel(fmt.Errorf("the loader sent %.40q, not a slot to give back", line))
			return
		}
		if err := r.giveBack(n); err != nil {
			cancel(err)
			return
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		cancel(fmt.Errorf("the loader sent a line of more than %d bytes, not a slot to give back", bufio.MaxScanTokenSize))
		return
	}
	cancel(errLoaderGone) // closed, or reset by a loader killed with lines unread
}

// slotBytesFor is a slot's size: what the user asked for, or room for a
// whole batch of rows shaped as first's (a first batch may be short, of
// records skipped), when that is more. Rows of varying size (LoD) may need
// more: the loader's slot_bytes says how much.
func slotBytesFor(first actors.Item, batch, asked int) int {
	rows := len(first.IDs)
	if rows == 0 {
		return max(asked, minSlotBytes)
	}
	n := alignUp(8 * batch)
	for _, t := range first.Slots {
		n += alignUp((len(t.Bytes()) + rows - 1) / rows * batch)
		for range t.LoD {
			n += alignUp(8 * (batch + 1))
		}
	}
	return max(asked, minSlotBytes, n, itemBytes(first))
}
