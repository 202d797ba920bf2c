package readers_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// The tests decode and index into a cache of their own, not the user's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testutil.OwnDir{M: m, Env: readers.DecodeCacheEnv})
}

// item is an instance holding one int64 value as a [1] tensor.
func item(v int64) tensor.Slots {
	return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{v})}}
}

// ints returns the items 1..n (or from..to) as a slice reader source.
func ints(from, to int) []tensor.Slots {
	var out []tensor.Slots
	for v := from; v <= to; v++ {
		out = append(out, item(int64(v)))
	}
	return out
}

// values flattens the first slot of every item.
func values(t testing.TB, items []tensor.Slots) []int64 {
	t.Helper()
	var out []int64
	for _, it := range items {
		v, err := tensor.View[int64](it[0].Tensor)
		require.NoError(t, err)
		out = append(out, v...)
	}
	return out
}

func readAll(t testing.TB, r readers.Reader) []int64 {
	t.Helper()
	items, err := readers.ReadAll(context.Background(), r)
	require.NoError(t, err)
	return values(t, items)
}

func seq(from, to int) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, int64(v))
	}
	return out
}

var errSource = errors.New("source broke")

// counting is a source that counts reads and fails after failAfter items
// (never if failAfter < 0).
type counting struct {
	items     []tensor.Slots
	pos       int
	reads     int
	resets    int
	failAfter int
	closed    bool
}

func newCounting(n, failAfter int) *counting {
	return &counting{items: ints(1, n), failAfter: failAfter}
}

func (c *counting) Next(ctx context.Context) (tensor.Slots, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.reads++
	if c.failAfter >= 0 && c.pos >= c.failAfter {
		return nil, errSource
	}
	if c.pos >= len(c.items) {
		return nil, io.EOF
	}
	c.pos++
	return c.items[c.pos-1], nil
}

func (c *counting) Reset() error { c.pos = 0; c.resets++; return nil }
func (c *counting) Close() error { c.closed = true; return nil }

// blocking is a source that blocks in Next until its context ends, after
// yielding n items: a stand-in for a stalled producer.
type blocking struct {
	n, pos int
}

func (b *blocking) Next(ctx context.Context) (tensor.Slots, error) {
	if b.pos < b.n {
		b.pos++
		return item(int64(b.pos)), nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (b *blocking) Reset() error { b.pos = 0; return nil }
func (b *blocking) Close() error { return nil }
