package actors_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/supervisor"
)

// globalIDX writes an IDX file for each of sizes, of records of 8 bytes:
// record r of file f holds f and r (uint32 each, little-endian).
func globalIDX(t testing.TB, sizes ...int) []string {
	dir := t.TempDir()
	var paths []string
	for f, n := range sizes {
		data := make([]byte, 8*n)
		for r := range n {
			binary.LittleEndian.PutUint32(data[8*r:], uint32(f))
			binary.LittleEndian.PutUint32(data[8*r+4:], uint32(r))
		}
		paths = append(paths, "idx:"+writeIDX(t, filepath.Join(dir, fmt.Sprintf("part-%d-idx2-ubyte", f)), []uint32{uint32(n), 8}, data, false))
	}
	return paths
}

// global is Files(paths) in the global order, in batches of 16.
func global(paths []string, threads int) []actors.Stage {
	return []actors.Stage{actors.Files{Paths: paths, Threads: threads}, actors.Shuffle{Global: true, Seed: 11}, actors.Batch{Size: 16}}
}

// checkGlobalRows checks that every row of an item of globalIDX's files
// holds the file and record its id names.
func checkGlobalRows(t testing.TB, it actors.Item) {
	t.Helper()
	rows := it.Slots[0].Bytes()
	require.Len(t, rows, 8*it.Instances)
	for i, id := range it.IDs {
		f, r := messages.SplitID(id)
		require.Equal(t, [2]uint32{uint32(f), uint32(r)},
			[2]uint32{binary.LittleEndian.Uint32(rows[8*i:]), binary.LittleEndian.Uint32(rows[8*i+4:])}, "row %d", i)
	}
}

// wantGlobal is epoch e of the global order over files of sizes, as ids.
func wantGlobal(t testing.TB, seed uint64, e int, sizes ...int) []uint64 {
	var splits []order.Split
	for f, n := range sizes {
		if n > 0 {
			splits = append(splits, order.Split{File: f, Count: uint64(n)})
		}
	}
	o, err := order.New(splits, order.Config{Seed: seed, Global: true, Files: len(sizes)})
	require.NoError(t, err)
	ep := o.Epoch(uint64(e))
	var ids []uint64
	ep.Records(order.Range{Hi: o.Len()}, func(f int, rec uint64) { ids = append(ids, messages.SampleID(f, int(rec))) })
	return ids
}

// Each epoch of the global order is the order function's permutation of
// every record of the data set, an empty file among them, whatever the
// readers and lanes; its records hold what their ids name; epochs differ.
func TestGlobalOrderIsThePermutationOfTheDataSet(t *testing.T) {
	ctx := testutil.Context(t)
	sizes := []int{1000, 0, 2500, 1}
	paths := globalIDX(t, sizes...)
	var first [][]uint64
	for _, c := range []struct{ threads, lanes, group int }{{1, 1, 64}, {3, 2, 8}} {
		p, err := actors.New(global(paths, c.threads), actors.Options{System: sharedSys, Lanes: c.lanes, GroupSize: c.group})
		require.NoError(t, err)
		passes := passItems(t, ctx, p, 2, func(it actors.Item) []uint64 {
			checkGlobalRows(t, it)
			return slices.Clone(it.IDs)
		})
		closeAndCheck(t, p, sharedSys)
		var epochs [][]uint64
		for e, pass := range passes {
			ids := slices.Concat(pass...)
			require.Equal(t, wantGlobal(t, 11, e, sizes...), ids, "epoch %d", e)
			epochs = append(epochs, ids)
		}
		require.NotEqual(t, epochs[0], epochs[1])
		if first == nil {
			first = epochs
		}
		require.Equal(t, first, epochs, "the order does not depend on readers or lanes")
	}
}

// WebDataset shards and TFRecord files are read by position too; a
// damaged sample is skipped under SkipCorrupt (and counted), and fails the
// pipeline otherwise, its StageError naming the shard and the sample's
// record (a sim scenario found them naming the virtual file).
func TestGlobalOrderReadsStreamFiles(t *testing.T) {
	ctx := testutil.Context(t)
	dir := t.TempDir()
	var shards, records []string
	for s := range 2 {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		var tf bytes.Buffer
		tw := tfrecord.NewWriter(&tf)
		for i := range 700 {
			cls := fmt.Sprint(i % 10)
			if s == 1 && i == 300 {
				cls = "damaged"
			}
			require.NoError(t, w.WriteHeader(&tar.Header{Name: fmt.Sprintf("%d-%05d.cls", s, i), Mode: 0o444, Size: int64(len(cls)), Typeflag: tar.TypeReg}))
			_, err := w.Write([]byte(cls))
			require.NoError(t, err)
			var x tfrecord.Example
			x.Int64("label", int64(1000*s+i))
			require.NoError(t, tw.Write(x.Marshal()))
		}
		require.NoError(t, w.Close())
		shard, rec := filepath.Join(dir, fmt.Sprintf("shard-%d.tar", s)), filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", s))
		require.NoError(t, os.WriteFile(shard, b.Bytes(), 0o644))
		require.NoError(t, os.WriteFile(rec, tf.Bytes(), 0o644))
		shards, records = append(shards, "wds:"+shard), append(records, "tfrecord:"+rec)
	}
	p, err := actors.New(global(records, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	got := readPass(t, ctx, p, func(it actors.Item) {
		labels := it.Slots[0].Bytes()
		for i, id := range it.IDs {
			f, r := messages.SplitID(id)
			require.EqualValues(t, 1000*f+r, int64(binary.LittleEndian.Uint64(labels[8*i:])))
		}
	})
	closeAndCheck(t, p, sharedSys)
	require.Equal(t, wantGlobal(t, 11, 0, 700, 700), got)

	p, err = actors.New(global(shards, 2), actors.Options{System: sharedSys, OnCorrupt: supervisor.SkipCorrupt})
	require.NoError(t, err)
	got = readPass(t, ctx, p, func(actors.Item) {})
	require.EqualValues(t, 1, p.Stats().Skipped)
	closeAndCheck(t, p, sharedSys)
	want := slices.DeleteFunc(wantGlobal(t, 11, 0, 700, 700), func(id uint64) bool { return id == messages.SampleID(1, 300) })
	require.Equal(t, want, got)

	p, err = actors.New(global(shards, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	for err == nil {
		_, err = p.Next(ctx)
	}
	se, ok := errors.AsType[*actors.StageError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, [2]any{filepath.Join(dir, "shard-1.tar"), int64(300)}, [2]any{se.File, se.Record}, "the data set's file and record, not the virtual file's")
	require.NoError(t, p.Close())
}

// The global order refuses, before anything is read, files it cannot read
// by position and shuffles it cannot be, saying what to do.
func TestGlobalOrderRefusesWhatItCannotRead(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, "off")
	dir := t.TempDir()
	gz := writeIDX(t, filepath.Join(dir, "gz-idx2-ubyte"), []uint32{10, 8}, make([]byte, 80), true)
	var shard bytes.Buffer
	w := tar.NewWriter(&shard)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: "a.cls", Mode: 0o444, Size: 1, Typeflag: tar.TypeReg}))
	_, err := w.Write([]byte("1"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err = zw.Write(shard.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	tgz := filepath.Join(dir, "shard.tar.gz")
	require.NoError(t, os.WriteFile(tgz, z.Bytes(), 0o644))
	for name, c := range map[string]struct{ path, says string }{
		"RecordIO":          {testutil.WriteFiles(t, 1, 10, 5)[0], "whose checksums cover whole chunks"},
		"gzip'd IDX":        {"idx:" + gz, "gunzip"},
		"gzip'd WebDataset": {"wds:" + tgz, "decompress it"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := actors.New(global([]string{c.path}, 1), actors.Options{System: sharedSys})
			require.ErrorIs(t, err, readers.ErrNotPositional)
			require.ErrorContains(t, err, c.says)
			require.ErrorContains(t, err, "--shuffle N")
		})
	}
	paths := globalIDX(t, 10)
	for _, stages := range [][]actors.Stage{
		{actors.Files{Paths: paths}, actors.Shuffle{Global: true, Window: 5}},
		{actors.Files{Paths: paths}, actors.Batch{Size: 2}, actors.Shuffle{Global: true}},
		{actors.Files{Paths: paths, AnyOrder: true}, actors.Shuffle{Global: true}},
	} {
		_, err := actors.New(stages, actors.Options{System: sharedSys})
		require.ErrorIs(t, err, actors.ErrBadSpec)
	}
}

// A job in the global order stopped anywhere, several times, each time
// resumed from its state with other readers and lanes, delivers what the
// uninterrupted job does; ranks stopped at different steps resume as
// another number of ranks, every record of the epoch once.
func TestGlobalOrderResumesExactlyOnAnyWorld(t *testing.T) {
	ctx := testutil.Context(t)
	paths := globalIDX(t, 300, 457)
	p, err := actors.New(global(paths, 2), actors.Options{System: sharedSys, GroupSize: 8})
	require.NoError(t, err)
	want := slices.Concat(passItems(t, ctx, p, 2, func(it actors.Item) [][]uint64 { return [][]uint64{slices.Clone(it.IDs)} })...)
	closeAndCheck(t, p, sharedSys)
	var wantBatches [][]uint64
	for _, b := range want {
		wantBatches = append(wantBatches, b...)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for range 4 {
		cuts := []int{rng.IntN(len(wantBatches) + 1), rng.IntN(len(wantBatches) + 1)}
		slices.Sort(cuts)
		var got [][]uint64
		var st *actors.State
		for i, end := range append(cuts, len(wantBatches)) {
			p, err := actors.New(global(paths, 1+i%3), actors.Options{System: sharedSys, GroupSize: 8, Resume: own(st), Lanes: 1 + i%2})
			require.NoError(t, err)
			for len(got) < end {
				it, err := p.Next(ctx)
				if errors.Is(err, io.EOF) {
					require.NoError(t, p.Reset())
					continue
				}
				require.NoError(t, err)
				checkGlobalRows(t, it)
				got = append(got, slices.Clone(it.IDs))
			}
			s, err := p.State()
			require.NoError(t, err)
			require.True(t, s.Global)
			st = saved(t, s)
			closeAndCheck(t, p, sharedSys)
		}
		require.Equal(t, wantBatches, got, "stopped after %v batches", cuts)
	}

	seen := map[uint64]int{}
	note := func(it actors.Item) {
		checkGlobalRows(t, it)
		for _, id := range it.IDs[:it.Instances-it.Padding] {
			seen[id]++
		}
	}
	var states []actors.State
	for rank := range 4 {
		p, err := actors.New(global(paths, 2), actors.Options{System: sharedSys, GroupSize: 8, Shard: actors.Shard{Rank: rank, World: 4, Remainder: order.Pad}})
		require.NoError(t, err)
		for range 1 + rank%3 {
			it, err := p.Next(ctx)
			require.NoError(t, err)
			note(it)
		}
		s, err := p.State()
		require.NoError(t, err)
		states = append(states, *saved(t, s))
		closeAndCheck(t, p, sharedSys)
	}
	for rank := range 3 {
		p, err := actors.New(global(paths, 3), actors.Options{System: sharedSys, GroupSize: 8, Resume: states,
			Shard: actors.Shard{Rank: rank, World: 3, Remainder: order.Pad}})
		require.NoError(t, err)
		readPass(t, ctx, p, note)
		closeAndCheck(t, p, sharedSys)
	}
	require.Len(t, seen, 757)
	for id, k := range seen {
		require.Equal(t, 1, k, "record %x", id)
	}
	// A state of the global order resumes only a global order.
	_, err = actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 50, Seed: 11}, actors.Batch{Size: 16}},
		actors.Options{System: sharedSys, Resume: states, Shard: actors.Shard{World: 3, Remainder: order.Pad}})
	require.ErrorContains(t, err, "a global shuffle")
}

// A global order over a billion records starts as one over a thousand:
// nothing is made a split or a window at a time of the whole data set
// (it took minutes before the first batch, and a million splits).
func TestGlobalOrderStartsAtAnySize(t *testing.T) {
	ctx := testutil.Context(t)
	const n = 1_000_000_000
	path := filepath.Join(t.TempDir(), "huge-idx2-ubyte")
	header := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{0, 0, 8, 2}, n), 1)
	require.NoError(t, os.WriteFile(path, header, 0o644))
	require.NoError(t, os.Truncate(path, int64(len(header))+n)) // sparse: zeros
	p, err := actors.New(global([]string{"idx:" + path}, 2), actors.Options{System: sharedSys})
	require.NoError(t, err)
	it, err := p.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 16, it.Instances)
	ep := mustGlobal(t, n)
	for g, id := range it.IDs {
		f, r := ep.At(uint64(g))
		require.Equal(t, messages.SampleID(f, int(r)), id)
	}
	closeAndCheck(t, p, sharedSys)
}

// mustGlobal is epoch 0 of global's order over one file of n records.
func mustGlobal(t testing.TB, n uint64) *order.Epoch {
	o, err := order.New([]order.Split{{Count: n}}, order.Config{Seed: 11, Global: true, Files: 1})
	require.NoError(t, err)
	return o.Epoch(0)
}

// Pipelines that share an IndexCache keep each order's index of a file:
// the windowed order after a global one over the same files permutes its
// splits as it does alone.
func TestIndexCacheKeepsEachOrdersSplits(t *testing.T) {
	ctx := testutil.Context(t)
	paths := globalIDX(t, 5000)
	windowed := []actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 64, Seed: 1}, actors.Batch{Size: 16}}
	read := func(stages []actors.Stage, cache *actors.IndexCache) []uint64 {
		p, err := actors.New(stages, actors.Options{System: sharedSys, Indexes: cache})
		require.NoError(t, err)
		defer closeAndCheck(t, p, sharedSys)
		return readPass(t, ctx, p, func(actors.Item) {})
	}
	alone := read(windowed, nil)
	cache := actors.NewIndexCache(0)
	read(global(paths, 1), cache)
	require.Equal(t, alone, read(windowed, cache))
	require.EqualValues(t, 0, cache.Hits())
}

// A global shuffle with OrWindow shuffles a data set it cannot read by
// position (RecordIO) in that window, exactly as a Shuffle of that window
// does, and Windowed names the file and why; over IDX files it is the
// global order.
func TestGlobalOrderFallsBackToItsWindow(t *testing.T) {
	ctx := testutil.Context(t)
	ids := func(stages []actors.Stage) ([][]uint64, error) {
		p, err := actors.New(stages, actors.Options{System: sharedSys})
		require.NoError(t, err)
		defer closeAndCheck(t, p, sharedSys)
		passes := passItems(t, ctx, p, 2, func(it actors.Item) []uint64 { return slices.Clone(it.IDs) })
		return [][]uint64{slices.Concat(passes[0]...), slices.Concat(passes[1]...)}, p.Windowed()
	}
	recordio := testutil.WriteFiles(t, 3, 200, 5)
	orWindow := actors.Shuffle{Global: true, OrWindow: 64, Seed: 11}
	got, why := ids([]actors.Stage{actors.Files{Paths: recordio}, orWindow, actors.Batch{Size: 16}})
	require.ErrorIs(t, why, readers.ErrNotPositional)
	require.ErrorContains(t, why, recordio[0])
	want, none := ids([]actors.Stage{actors.Files{Paths: recordio}, actors.Shuffle{Window: 64, Seed: 11}, actors.Batch{Size: 16}})
	require.NoError(t, none)
	require.Equal(t, want, got)

	sizes := []int{300, 200}
	got, why = ids([]actors.Stage{actors.Files{Paths: globalIDX(t, sizes...)}, orWindow, actors.Batch{Size: 16}})
	require.NoError(t, why)
	require.Equal(t, [][]uint64{wantGlobal(t, 11, 0, sizes...), wantGlobal(t, 11, 1, sizes...)}, got)

	_, err := actors.New([]actors.Stage{actors.Files{Paths: recordio}, actors.Shuffle{Window: 8, OrWindow: 64}}, actors.Options{System: sharedSys})
	require.ErrorIs(t, err, actors.ErrBadSpec)
}

// stallAddressable is a positional reader whose Addressable, which indexes
// a stream file, blocks until the context it was opened with ends, as a
// read of the file that hangs would.
type stallAddressable struct {
	readers.Positional
	ctx context.Context
}

func (s stallAddressable) Addressable() error {
	<-s.ctx.Done()
	return s.ctx.Err()
}

// A read that hangs while the global order indexes a stream file (its
// Addressable) is abandoned after ReadTimeout and the file opened again,
// as any stalled read is. Before, Addressable ran outside the watchdog:
// building the pipeline hung for good (sim, seeds from 3000).
func TestGlobalOrderAbandonsAStalledIndexing(t *testing.T) {
	ctx := testutil.Context(t)
	dir := t.TempDir()
	var entries []string
	for f := range 2 {
		var b bytes.Buffer
		w := tfrecord.NewWriter(&b)
		for i := range 50 {
			var x tfrecord.Example
			x.Int64("label", int64(1000*f+i))
			require.NoError(t, w.Write(x.Marshal()))
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", f))
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		entries = append(entries, "tfrecord:"+path)
	}
	o := &opens{wrap: func(ctx context.Context, entry string, n int, r readers.Reader) readers.Reader {
		if entry == entries[1] && n == 1 {
			return stallAddressable{r.(readers.Positional), ctx}
		}
		return r
	}}
	p, err := actors.New(global(entries, 2), actors.Options{System: sharedSys, Open: o.open, ReadTimeout: 20 * time.Millisecond,
		Retry: supervisor.Backoff{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 3}})
	require.NoError(t, err)
	require.Equal(t, wantGlobal(t, 11, 0, 50, 50), readPass(t, ctx, p, func(actors.Item) {}))
	closeAndCheck(t, p, sharedSys)
}
