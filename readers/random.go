package readers

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/tensor"
)

// RandomOptions configure RandomData (create_random_data_generator).
type RandomOptions struct {
	// Shapes of the slots, one float32 tensor each; every shape is concrete
	// and of rank 2 or more, as upstream requires.
	Shapes   []tensor.Shape
	Min, Max float32 // values are uniform in [Min, Max]
	Seed     uint64
}

// MaxRandomElements bounds the elements of one random sample, all slots
// together (1 GiB of float32): a shape too large to allocate is an error
// when the reader is made, not a panic at every read.
const MaxRandomElements = 1 << 28

type randomData struct {
	opts   RandomOptions
	rng    *rand.Rand
	closed bool
}

// RandomData returns a reader of uniform random float32 tensors that never
// ends. Reset restarts the same sequence from the seed.
func RandomData(opts RandomOptions) (Reader, error) {
	if len(opts.Shapes) == 0 {
		return nil, fmt.Errorf("%w: random data needs at least one slot shape", tensor.ErrShape)
	}
	total := 0
	for i, s := range opts.Shapes {
		if s.Rank() < 2 || !s.Concrete() {
			return nil, fmt.Errorf("%w: random data slot %d: shape %v must be concrete and of rank >= 2", tensor.ErrShape, i, s)
		}
		n := s.NumElements()
		if n < 0 || n > MaxRandomElements-total {
			return nil, fmt.Errorf("%w: random data slot %d: shape %v makes samples of more than %d float32 elements (MaxRandomElements)", tensor.ErrShape, i, s, MaxRandomElements)
		}
		total += n
	}
	if !(opts.Min <= opts.Max) {
		return nil, fmt.Errorf("readers: random data: min %v above max %v", opts.Min, opts.Max)
	}
	r := &randomData{opts: opts}
	r.rng = rand.New(rand.NewPCG(opts.Seed, 0))
	return r, nil
}

func (r *randomData) Next(ctx context.Context) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(tensor.Slots, len(r.opts.Shapes))
	span := r.opts.Max - r.opts.Min
	for i, shape := range r.opts.Shapes {
		vals := make([]float32, shape.NumElements())
		for k := range vals {
			vals[k] = r.opts.Min + span*r.rng.Float32()
		}
		out[i] = tensor.LoDTensor{Tensor: tensor.MustFromSlice(shape, vals)}
	}
	return out, nil
}

func (r *randomData) Reset() error {
	if r.closed {
		return ErrClosed
	}
	r.rng = rand.New(rand.NewPCG(r.opts.Seed, 0))
	return nil
}

func (r *randomData) Close() error { r.closed = true; return nil }
