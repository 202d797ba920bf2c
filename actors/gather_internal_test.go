package actors

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/tensor"
)

// gatherIDX is a gather source over an IDX file of n records of 8 bytes,
// record r holding r twice (uint32, little-endian), in the global order.
func gatherIDX(t *testing.T, n int) *gatherSource {
	return gatherIDXOpenedBy(t, n, OpenFile)
}

// gatherIDXOpenedBy is gatherIDX with its files opened by open.
func gatherIDXOpenedBy(t *testing.T, n int, open func(context.Context, string) (readers.Reader, error)) *gatherSource {
	header := []byte{0, 0, 8, 2}
	header = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(header, uint32(n)), 8)
	data := make([]byte, 8*n)
	for r := range n {
		binary.LittleEndian.PutUint32(data[8*r:], uint32(r))
		binary.LittleEndian.PutUint32(data[8*r+4:], uint32(r))
	}
	path := filepath.Join(t.TempDir(), "data-idx2-ubyte")
	require.NoError(t, os.WriteFile(path, append(header, data...), 0o644))
	fs, err := newFileSource([]string{"idx:" + path}, open)
	require.NoError(t, err)
	ord, err := order.New([]order.Split{{File: 0, Count: uint64(n)}}, order.Config{Seed: 3, Global: true, Files: 1})
	require.NoError(t, err)
	src := newGatherSource(fs, &protocol.Plan{Ord: ord, Unit: 16, World: 1})
	t.Cleanup(src.close)
	return src
}

// checkRecord checks that item is record rec of gatherIDX's file.
func checkRecord(t *testing.T, item tensor.Slots, rec uint64) {
	t.Helper()
	b := item[0].Bytes()
	require.Equal(t, [2]uint32{uint32(rec), uint32(rec)}, [2]uint32{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])})
}

// A gather reader reads records into memory of its own, reused from one
// look-ahead to the next only while every record in it was copied onto a
// stack: records handed on as they are (Next, or a record that does not
// stack) keep their bytes after later reads.
func TestGatherReaderKeepsTheRecordsItHandsOn(t *testing.T) {
	const n = 5 * gatherAhead
	src := gatherIDX(t, n)
	ep := src.plan.Ord.Epoch(0)
	r, err := src.Open(t.Context(), src.plan.Ord.Virtual(), 0, 0)
	require.NoError(t, err)
	defer r.Close()
	g := r.(*gatherReader)

	st := tensor.NewStack(gatherAhead)
	var stacked []tensor.Slots
	var kept []tensor.Slots
	for p := range uint64(n) {
		var item tensor.Slots
		if p%gatherAhead == 7 { // one record a look-ahead handed on as it is
			item, err = g.Next(t.Context())
			kept = append(kept, item)
		} else {
			item, err = g.NextStacked(t.Context(), st)
			require.Nil(t, item)
			if st.Full() {
				stacked = append(stacked, st.Take())
			}
		}
		require.NoError(t, err)
	}
	for i, item := range kept {
		_, rec := ep.At(uint64(i*gatherAhead + 7))
		checkRecord(t, item, rec)
	}
	p := uint64(0)
	for _, group := range stacked {
		rows, err := group.Instances()
		require.NoError(t, err)
		for row := range rows {
			if p%gatherAhead == 7 {
				p++
			}
			one, err := group.Slice(row, row+1)
			require.NoError(t, err)
			_, rec := ep.At(p)
			checkRecord(t, one, rec)
			p++
		}
	}
}

// The readers of the data set's files a gather reader holds end with the
// context it was opened with, as any reader's reads do, and not with the
// context of the gather reader that first opened them: they are pooled
// and outlive it. Before, a pooled reader kept its opener's context, so
// once that run's watchdog was closed every read by a later run through a
// reader bound to its context (an object's GETs, a user's Open) failed
// with "context canceled", and a stalled read waited on the old context,
// never abandoned when the holder's watchdog fired (sim --preempt
// --replay 907, with more runs to an epoch).
func TestGatherReadersEndWithTheirHoldersContext(t *testing.T) {
	var opened []context.Context
	src := gatherIDXOpenedBy(t, 4*gatherAhead, func(ctx context.Context, entry string) (readers.Reader, error) {
		opened = append(opened, ctx)
		return OpenFile(ctx, entry)
	})
	read := func(ctx context.Context) readers.Reader {
		r, err := src.Open(ctx, src.plan.Ord.Virtual(), 0, 0)
		require.NoError(t, err)
		_, err = r.Next(ctx)
		require.NoError(t, err)
		return r
	}
	// A run closes its reader, then its watchdog ends the reader's
	// context (fileRead.close): the file's reader goes back to the pool.
	first, endFirst := context.WithCancel(t.Context())
	r := read(first)
	require.NoError(t, r.Close())
	endFirst()
	require.Len(t, opened, 1)
	require.NoError(t, opened[0].Err(), "the pooled reader's context ended with its first holder's")

	second, endSecond := context.WithCancel(t.Context())
	r = read(second)
	require.Len(t, opened, 1, "the pooled reader is read again")
	endSecond() // the holder's watchdog fires: a stalled read must end
	<-opened[0].Done()
	require.NoError(t, r.Close())

	r = read(t.Context())
	require.Len(t, opened, 2, "a reader whose context ended is not pooled again")
	require.NoError(t, opened[1].Err())
	require.NoError(t, r.Close())

	// Opening a file reads (an index, a header) and may stall too: the
	// holder's context ends it.
	stalled := make(chan struct{})
	var once sync.Once
	src = gatherIDXOpenedBy(t, gatherAhead, func(ctx context.Context, entry string) (readers.Reader, error) {
		once.Do(func() { close(stalled) })
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, end := context.WithCancel(t.Context())
	go func() {
		<-stalled
		end()
	}()
	r, err := src.Open(ctx, src.plan.Ord.Virtual(), 0, 0)
	require.NoError(t, err)
	_, err = r.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, r.Close())
}
