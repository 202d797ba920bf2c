package readers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// Upstream conformance: 165/160/200/159 samples at batch 32 give 6/5/7/5
// batches, 5/5/6/4 with drop_last.
func TestBatchCountsMatchUpstream(t *testing.T) {
	cases := []struct{ n, keep, drop int }{{165, 6, 5}, {160, 5, 5}, {200, 7, 6}, {159, 5, 4}}
	for _, c := range cases {
		for _, dropLast := range []bool{false, true} {
			r := readers.Batch(readers.FromSlice(ints(1, c.n)), 32, dropLast)
			batches, err := readers.ReadAll(context.Background(), r)
			require.NoError(t, err)
			want := c.keep
			if dropLast {
				want = c.drop
			}
			assert.Len(t, batches, want, "%d samples, drop_last=%v", c.n, dropLast)
			got := values(t, batches)
			if !dropLast {
				assert.Equal(t, seq(1, c.n), got)
			}
			for i, b := range batches[:len(batches)-1] {
				assert.Equal(t, tensor.Shape{32}, b[0].Shape(), "batch %d", i)
			}
		}
	}
}

func TestBatchReportsMismatchedInstances(t *testing.T) {
	bad := []tensor.Slots{item(1), {{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []float32{2})}}}
	_, err := readers.ReadAll(context.Background(), readers.Batch(readers.FromSlice(bad), 2, false))
	require.ErrorIs(t, err, tensor.ErrDType)
	assert.ErrorContains(t, err, "slot 0")
}

func TestShuffleWindowZeroOrOneKeepsOrder(t *testing.T) {
	for _, w := range []int{0, 1} {
		assert.Equal(t, seq(1, 50), readAll(t, readers.Shuffle(readers.FromSlice(ints(1, 50)), w, 99)), "window %d", w)
	}
}

func TestShuffleKeepsWindowsApartAndReplays(t *testing.T) {
	src := readers.FromSlice(ints(1, 95))
	r := readers.Shuffle(src, 10, 7)
	pass0 := readAll(t, r)
	require.Len(t, pass0, 95)
	assert.NotEqual(t, seq(1, 95), pass0, "window 10 must shuffle")
	for w := 0; w < 95; w += 10 {
		end := min(w+10, 95)
		block := slices.Clone(pass0[w:end])
		slices.Sort(block)
		assert.Equal(t, seq(w+1, end), block, "window starting at %d mixes with another", w)
	}
	require.NoError(t, r.Reset())
	pass1 := readAll(t, r)
	assert.NotEqual(t, pass0, pass1, "a new pass has a new order")

	// The same seed replays pass 0, and ShuffleFromPass replays pass 1.
	assert.Equal(t, pass0, readAll(t, readers.Shuffle(readers.FromSlice(ints(1, 95)), 10, 7)))
	assert.Equal(t, pass1, readAll(t, readers.ShuffleFromPass(readers.FromSlice(ints(1, 95)), 10, 7, 1)))
	assert.NotEqual(t, pass0, readAll(t, readers.Shuffle(readers.FromSlice(ints(1, 95)), 10, 8)))
}

func TestShuffleKeepsItemsAcrossATransientError(t *testing.T) {
	src := &flaky{items: ints(1, 30), failAt: map[int]bool{4: true, 17: true}}
	r := readers.Shuffle(src, 8, 1)
	var got []int64
	for {
		it, err := r.Next(context.Background())
		if errors.Is(err, errSource) {
			continue // retry: nothing may be lost
		}
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, values(t, []tensor.Slots{it})...)
	}
	slices.Sort(got)
	assert.Equal(t, seq(1, 30), got)
}

// flaky fails once at each listed position, then succeeds there.
type flaky struct {
	items  []tensor.Slots
	pos    int
	failAt map[int]bool
}

func (f *flaky) Next(context.Context) (tensor.Slots, error) {
	if f.failAt[f.pos] {
		delete(f.failAt, f.pos)
		return nil, errSource
	}
	if f.pos >= len(f.items) {
		return nil, io.EOF
	}
	f.pos++
	return f.items[f.pos-1], nil
}
func (f *flaky) Reset() error { f.pos = 0; return nil }
func (f *flaky) Close() error { return nil }

func TestMultiPassServesEveryPass(t *testing.T) {
	src := newCounting(7, -1)
	r := readers.MultiPass(src, 3)
	h := readers.NewHolder(r)
	var got []int64
	for {
		ok, err := h.HasNext(context.Background())
		require.NoError(t, err)
		if !ok {
			break
		}
		it, err := h.Next(context.Background())
		require.NoError(t, err)
		got = append(got, values(t, []tensor.Slots{it})...)
	}
	assert.Equal(t, slices.Concat(seq(1, 7), seq(1, 7), seq(1, 7)), got)
	assert.Equal(t, 2, src.resets)
	require.NoError(t, r.Reset())
	assert.Len(t, readAll(t, r), 21)
}

func TestComposeFailsAfterTheAlignedPrefix(t *testing.T) {
	r := readers.Compose(readers.FromSlice(ints(1, 5)), readers.FromSlice(ints(11, 17)))
	for i := range 5 {
		it, err := r.Next(context.Background())
		require.NoError(t, err, "item %d", i)
		require.Len(t, it, 2)
		assert.Equal(t, []int64{int64(i + 1), int64(i + 11)}, values(t, []tensor.Slots{it[:1], it[1:]}))
	}
	_, err := r.Next(context.Background())
	require.ErrorIs(t, err, readers.ErrUnaligned)
	assert.ErrorContains(t, err, "after 5 items")

	aligned := readers.Compose(readers.FromSlice(ints(1, 4)), readers.FromSlice(ints(5, 8)))
	items, err := readers.ReadAll(context.Background(), aligned)
	require.NoError(t, err)
	assert.Len(t, items, 4)
}

// A legitimate zero value or an empty item is data, not an end.
func TestComposeIsNotFooledByZeroValues(t *testing.T) {
	zeros := []tensor.Slots{item(0), item(0), item(0)}
	empties := []tensor.Slots{{}, {}, {}}
	r := readers.Compose(readers.FromSlice(zeros), readers.FromSlice(empties), readers.FromSlice(ints(1, 3)))
	items, err := readers.ReadAll(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, items, 3)
	for _, it := range items {
		require.Len(t, it, 2)
	}
}

func TestChainOfTwoTenItemReaders(t *testing.T) {
	r := readers.Chain(readers.FromSlice(ints(1, 10)), readers.FromSlice(ints(11, 20)))
	assert.Equal(t, seq(1, 20), readAll(t, r))
	require.NoError(t, r.Reset())
	assert.Len(t, readAll(t, r), 20)
}

func TestFirstNPullsExactlyN(t *testing.T) {
	src := newCounting(100, -1)
	r := readers.FirstN(src, 10)
	assert.Equal(t, seq(1, 10), readAll(t, r))
	assert.Equal(t, 10, src.reads, "firstn must not pull item n+1")
	assert.Equal(t, seq(1, 0), readAll(t, readers.FirstN(readers.FromSlice(ints(1, 5)), 0)))
}

func TestMapAppliesAndPropagates(t *testing.T) {
	double := func(s tensor.Slots) (tensor.Slots, error) {
		v, err := tensor.View[int64](s[0].Tensor)
		if err != nil {
			return nil, err
		}
		if v[0] == 4 {
			return nil, fmt.Errorf("cannot map 4: %w", errSource)
		}
		return item(2 * v[0]), nil
	}
	r := readers.Map(readers.FromSlice(ints(1, 3)), double)
	assert.Equal(t, []int64{2, 4, 6}, readAll(t, r))
	_, err := readers.ReadAll(context.Background(), readers.Map(readers.FromSlice(ints(1, 5)), double))
	assert.ErrorIs(t, err, errSource)
}

func TestCacheRecordsLazilyOnTheFirstFullPass(t *testing.T) {
	src := newCounting(10, -1)
	r := readers.Cache(src)
	// Nothing read ahead: one Next is one source read.
	_, err := r.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, src.reads)
	// A reset before the end discards the partial pass.
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 10), readAll(t, r))
	reads := src.reads
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 10), readAll(t, r))
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 10), readAll(t, r))
	assert.Equal(t, reads, src.reads, "later passes come from memory")
}

// xmap, ordered and unordered, over thread counts 1..16 and buffer sizes
// 1..16, gives 1..10.
func TestXMapConformance(t *testing.T) {
	ident := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	for workers := 1; workers <= 16; workers++ {
		for buffer := 1; buffer <= 16; buffer++ {
			for _, ordered := range []bool{true, false} {
				r := readers.XMap(readers.FromSlice(ints(1, 10)), ident, workers, buffer, ordered)
				got := readAll(t, r)
				if !ordered {
					slices.Sort(got)
				}
				require.Equal(t, seq(1, 10), got, "workers %d buffer %d ordered %v", workers, buffer, ordered)
				require.NoError(t, r.Close())
			}
		}
	}
}

func TestXMapOrderedUnderUnevenWork(t *testing.T) {
	// Early items take longest: ordered output must still be in order.
	slow := func(s tensor.Slots) (tensor.Slots, error) {
		v, _ := tensor.View[int64](s[0].Tensor)
		x := 0
		for i := range (200 - int(v[0])) * 2000 {
			x += i
		}
		_ = x
		return s, nil
	}
	r := readers.XMap(readers.FromSlice(ints(1, 200)), slow, 4, 3, true)
	assert.Equal(t, seq(1, 200), readAll(t, r))
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 200), readAll(t, r))
	require.NoError(t, r.Close())
}

func TestBufferedPrefetchesAndResets(t *testing.T) {
	src := newCounting(50, -1)
	r := readers.Buffered(src, 5)
	it, err := r.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, values(t, []tensor.Slots{it}))
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 50), readAll(t, r))
	require.NoError(t, r.Reset())
	assert.Equal(t, seq(1, 50), readAll(t, r))
	require.NoError(t, r.Close())
	assert.True(t, src.closed)
	_, err = r.Next(context.Background())
	assert.ErrorIs(t, err, readers.ErrClosed)
}

// Close while the prefetch goroutine is blocked, on a full buffer or in a
// stalled source, returns and leaves no goroutine (goleak checks in TestMain).
func TestConcurrentDecoratorsCloseWhileBlocked(t *testing.T) {
	ident := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	for name, mk := range map[string]func(readers.Reader) readers.Reader{
		"buffered": func(r readers.Reader) readers.Reader { return readers.Buffered(r, 2) },
		"xmap":     func(r readers.Reader) readers.Reader { return readers.XMap(r, ident, 3, 2, true) },
	} {
		t.Run(name, func(t *testing.T) {
			full := mk(readers.FromSlice(ints(1, 1000)))
			_, err := full.Next(context.Background())
			require.NoError(t, err)
			require.NoError(t, full.Close())

			stalled := mk(&blocking{n: 3})
			for range 3 {
				_, err := stalled.Next(context.Background())
				require.NoError(t, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = stalled.Next(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, stalled.Close())
		})
	}
}

// A source error reaches the consumer through every decorator, after the
// items read before it, never as an early io.EOF or a hang.
func TestSourceErrorsReachTheConsumer(t *testing.T) {
	ident := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	decorators := map[string]func(readers.Reader) readers.Reader{
		"shuffle":    func(r readers.Reader) readers.Reader { return readers.Shuffle(r, 4, 1) },
		"batch":      func(r readers.Reader) readers.Reader { return readers.Batch(r, 3, false) },
		"multipass":  func(r readers.Reader) readers.Reader { return readers.MultiPass(r, 2) },
		"map":        func(r readers.Reader) readers.Reader { return readers.Map(r, ident) },
		"firstn":     func(r readers.Reader) readers.Reader { return readers.FirstN(r, 100) },
		"cache":      readers.Cache,
		"buffered":   func(r readers.Reader) readers.Reader { return readers.Buffered(r, 3) },
		"xmap":       func(r readers.Reader) readers.Reader { return readers.XMap(r, ident, 4, 2, true) },
		"xmap-unord": func(r readers.Reader) readers.Reader { return readers.XMap(r, ident, 4, 2, false) },
		"chain":      func(r readers.Reader) readers.Reader { return readers.Chain(readers.FromSlice(ints(1, 2)), r) },
		"compose":    func(r readers.Reader) readers.Reader { return readers.Compose(r, readers.FromSlice(ints(1, 50))) },
		"holder":     func(r readers.Reader) readers.Reader { return readers.NewHolder(r) },
		"stacked": func(r readers.Reader) readers.Reader {
			return readers.Buffered(readers.Batch(readers.XMap(readers.Shuffle(r, 3, 2), ident, 2, 2, false), 2, true), 2)
		},
	}
	for name, mk := range decorators {
		t.Run(name, func(t *testing.T) {
			src := newCounting(50, 7)
			r := mk(src)
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
			defer cancel()
			items, err := readers.ReadAll(ctx, r)
			require.ErrorIs(t, err, errSource, "got %d items then %v", len(items), err)
			// The error is sticky or repeats: it never turns into an end.
			_, err = r.Next(ctx)
			assert.ErrorIs(t, err, errSource)
			require.NoError(t, r.Close())
		})
	}
}

func TestHolderHasNext(t *testing.T) {
	h := readers.NewHolder(readers.FromSlice(ints(1, 2)))
	ctx := context.Background()
	for range 2 {
		ok, err := h.HasNext(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = h.HasNext(ctx) // asking twice does not skip an item
		require.NoError(t, err)
		require.True(t, ok)
		_, err = h.Next(ctx)
		require.NoError(t, err)
	}
	ok, err := h.HasNext(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = h.Next(ctx)
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, h.Reset())
	ok, err = h.HasNext(ctx)
	require.NoError(t, err)
	assert.True(t, ok)

	failing := readers.NewHolder(newCounting(5, 0))
	ok, err = failing.HasNext(ctx)
	assert.False(t, ok)
	assert.ErrorIs(t, err, errSource)
	_, err = failing.Next(ctx)
	assert.ErrorIs(t, err, errSource)
}

func TestAllIterator(t *testing.T) {
	var got []int64
	for it, err := range readers.All(context.Background(), readers.FromSlice(ints(1, 5))) {
		require.NoError(t, err)
		got = append(got, values(t, []tensor.Slots{it})...)
		if len(got) == 3 {
			break
		}
	}
	assert.Equal(t, seq(1, 3), got)
	var errs []error
	for _, err := range readers.All(context.Background(), newCounting(5, 2)) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], errSource)
}

func TestRandomData(t *testing.T) {
	_, err := readers.RandomData(readers.RandomOptions{Shapes: []tensor.Shape{{784}}, Max: 1})
	require.ErrorIs(t, err, tensor.ErrShape, "rank 1 is refused as upstream")
	r, err := readers.RandomData(readers.RandomOptions{Shapes: []tensor.Shape{{1, 784}, {1, 1}}, Min: -1, Max: 1, Seed: 3})
	require.NoError(t, err)
	first, err := readers.ReadAll(context.Background(), readers.FirstN(r, 1000))
	require.NoError(t, err)
	require.Len(t, first, 1000, "random data never ends")
	for _, it := range first {
		v, err := tensor.View[float32](it[0].Tensor)
		require.NoError(t, err)
		for _, x := range v {
			require.True(t, x >= -1 && x <= 1, "value %v out of range", x)
		}
	}
	require.NoError(t, r.Reset())
	again, err := r.Next(context.Background())
	require.NoError(t, err)
	assert.True(t, again.Equal(first[0]), "reset replays from the seed")
}

func TestClosedReadersRefuse(t *testing.T) {
	r := readers.Batch(readers.FromSlice(ints(1, 4)), 2, false)
	require.NoError(t, r.Close())
	_, err := r.Next(context.Background())
	assert.ErrorIs(t, err, readers.ErrClosed)
	assert.ErrorIs(t, r.Reset(), readers.ErrClosed)
	assert.NoError(t, r.Close())
}

// A random-data shape too large to allocate panicked (makeslice) at every
// read, so a pipeline over it restarted its reader forever. It is an error
// when the reader is made.
func TestRandomDataRefusesShapesTooLargeToAllocate(t *testing.T) {
	for _, shapes := range [][]tensor.Shape{
		{{1 << 20, 1 << 20}},
		{{math.MaxInt / 2, 3}},
		{{1 << 14, 1 << 14}, {1 << 14, 1 << 14}},
	} {
		_, err := readers.RandomData(readers.RandomOptions{Shapes: shapes})
		require.ErrorIs(t, err, tensor.ErrShape, "%v", shapes)
		require.ErrorContains(t, err, "MaxRandomElements")
	}
	_, err := readers.RandomData(readers.RandomOptions{Shapes: []tensor.Shape{{1, 28, 28}}})
	require.NoError(t, err)
}

// The README's snippet with Open's error ignored made Shuffle over a nil
// reader: a nil-pointer SIGSEGV in Next and a nested panic in Close. Every
// decorator over a nil reader fails with ErrNilReader instead, and closes.
func TestDecoratorsOverANilReaderFailInsteadOfPanicking(t *testing.T) {
	fn := func(s tensor.Slots) (tensor.Slots, error) { return s, nil }
	for name, r := range map[string]readers.Reader{
		"shuffle":    readers.Shuffle(nil, 8, 1),
		"batch":      readers.Batch(nil, 4, false),
		"multi-pass": readers.MultiPass(nil, 2),
		"map":        readers.Map(nil, fn),
		"first-n":    readers.FirstN(nil, 3),
		"cache":      readers.Cache(nil),
		"buffered":   readers.Buffered(nil, 2),
		"xmap":       readers.XMap(nil, fn, 2, 2, true),
		"compose":    readers.Compose(readers.FromSlice(ints(1, 3)), nil),
		"chain":      readers.Chain(nil),
		"nested":     readers.MultiPass(readers.Batch(readers.Shuffle(nil, 4096, 1), 128, false), 2),
	} {
		_, err := r.Next(t.Context())
		require.ErrorIs(t, err, readers.ErrNilReader, name)
		require.NoError(t, r.Close(), name)
	}
}
