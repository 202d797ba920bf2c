// Package baseline holds the hand-written pipelines actorfeed's actor
// pipeline is measured against: the same stages (read and decode RecordIO
// records, window shuffle, batch, a 2-batch prefetch) with one goroutine
// each and channels between them, and nothing else: no supervision, no
// restarts, no protocol. Benchmarks (actors/bench_test.go) and `actorfeed
// bench` run them side by side with the actor pipeline.
//
// Channels is what a user would write: a record decoded at a time and
// handed on by itself. Stacked is the same stages on the read path the actor
// pipeline uses: records decoded in groups into one block each
// (tensor.Stack), blocks handed on, the shuffle moving references to rows,
// and the batch stage copying rows once. The actor pipeline's overhead is
// measured against Stacked. Parallel is Stacked in lanes, one per core, the
// baseline of a pipeline that spreads its per-sample work over the cores.
//
// baseline may import tensor and readers. Only benchmarks import it.
package baseline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// Channels reads the RecordIO files at paths in order, shuffles with a
// window (PCG seeded by seed), batches and prefetches 2 batches, and calls
// step on every batch. It returns the samples stepped.
func Channels(ctx context.Context, paths []string, window, batch int, seed uint64, step func(tensor.Slots)) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	records := make(chan tensor.Slots, 64)
	shuffled := make(chan tensor.Slots, 64)
	batches := make(chan tensor.Slots, 2) // the double buffer
	errc := make(chan error, 3)
	go func() {
		defer close(records)
		for _, path := range paths {
			if err := readFile(ctx, path, records); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		defer close(shuffled)
		rng := rand.New(rand.NewPCG(seed, 0))
		buf := make([]tensor.Slots, 0, max(window, 1))
		flush := func() bool {
			rng.Shuffle(len(buf), func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
			for _, s := range buf {
				if !send(ctx, shuffled, s) {
					return false
				}
			}
			buf = buf[:0]
			return true
		}
		for s := range records {
			if buf = append(buf, s); len(buf) >= window && !flush() {
				return
			}
		}
		flush()
	}()
	go func() {
		defer close(batches)
		pending := make([]tensor.Slots, 0, batch)
		emit := func() bool {
			out, err := tensor.Concat(pending)
			if err != nil {
				errc <- err
				return false
			}
			pending = pending[:0]
			return send(ctx, batches, out)
		}
		for s := range shuffled {
			if pending = append(pending, s); len(pending) == batch && !emit() {
				return
			}
		}
		if len(pending) > 0 {
			emit()
		}
	}()
	return stepAll(ctx, batches, errc, step)
}

func readFile(ctx context.Context, path string, out chan<- tensor.Slots) error {
	r, err := readers.OpenRecordFile(path)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		s, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !send(ctx, out, s) {
			return ctx.Err()
		}
	}
}

// row is one instance of a stacked block.
type row struct {
	block *block
	index int
}

// block is a group of stacked records, and how many of its rows are still
// to be batched; the batch stage hands its storage back to the reader when
// none are.
type block struct {
	slots   tensor.Slots
	storage []byte
	left    int
}

// StackedOptions configures Stacked.
type StackedOptions struct {
	Window, Batch int    // shuffle window and batch size, as Channels's
	Group         int    // records per block
	GroupBytes    int    // bytes per block, at most (tensor.Stack.SetMaxBytes); 0 bounds nothing
	Seed          uint64 // of the shuffle
	// Recycle makes batches in the storage of batches already stepped, as
	// the actor pipeline does with Devices.Recycle; step must not keep
	// the batch then.
	Recycle bool
}

// Stacked is Channels on the stacked read path (see the package comment):
// groups of o.Group records per block. A block's storage goes back to the
// reader once all its rows were batched, as the actor pipeline's does.
func Stacked(ctx context.Context, paths []string, o StackedOptions, step func(tensor.Slots)) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks := make(chan *block, 2)
	free := make(chan []byte, 8) // blocks whose rows were all batched
	shuffled := make(chan []row, 2)
	batches := make(chan tensor.Slots, 2) // the double buffer
	spent := make(chan tensor.Slots, 8)   // batches the device stepped, with Recycle
	errc := make(chan error, 2)
	go func() {
		defer close(blocks)
		for _, path := range paths {
			if err := readStacked(ctx, path, o, blocks, free); err != nil {
				errc <- err
				return
			}
		}
	}()
	go shuffleRows(ctx, o, blocks, shuffled)
	go func() {
		defer close(batches)
		if err := batchRows(ctx, o.Batch, shuffled, free, spent, batches); err != nil {
			errc <- err
		}
	}()
	if !o.Recycle {
		return stepAll(ctx, batches, errc, step)
	}
	return stepAll(ctx, batches, errc, func(b tensor.Slots) {
		step(b)
		select {
		case spent <- b:
		default:
		}
	})
}

// shuffleRows shuffles the rows of blocks in windows and hands them on in
// groups of o.Group.
func shuffleRows(ctx context.Context, o StackedOptions, blocks <-chan *block, shuffled chan<- []row) {
	defer close(shuffled)
	rng := rand.New(rand.NewPCG(o.Seed, 0))
	buf := make([]row, 0, max(o.Window, 1))
	flush := func() bool {
		rng.Shuffle(len(buf), func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
		for lo := 0; lo < len(buf); lo += o.Group {
			if !send(ctx, shuffled, slices.Clone(buf[lo:min(lo+o.Group, len(buf))])) {
				return false
			}
		}
		buf = buf[:0]
		return true
	}
	for b := range blocks {
		for i := range b.left {
			if buf = append(buf, row{b, i}); len(buf) >= o.Window && !flush() {
				return
			}
		}
	}
	flush()
}

// batchRows copies shuffled rows into batches of size, in the storage of a
// spent batch when one is free, and hands a block's storage back to its
// reader once all its rows were copied.
func batchRows(ctx context.Context, size int, shuffled <-chan []row, free chan<- []byte, spent <-chan tensor.Slots, out chan<- tensor.Slots) error {
	pending := make([]row, 0, size)
	var err error
	emit := func() bool {
		var reuse tensor.Slots
		select {
		case reuse = <-spent:
		default:
		}
		var b tensor.Slots
		if b, err = copyRows(reuse, pending); err != nil {
			return false
		}
		for _, r := range pending {
			if r.block.left--; r.block.left == 0 && r.block.storage != nil {
				select {
				case free <- r.block.storage:
				default:
				}
			}
		}
		clear(pending)
		pending = pending[:0]
		return send(ctx, out, b)
	}
	for rows := range shuffled {
		for _, r := range rows {
			if pending = append(pending, r); len(pending) == size && !emit() {
				return err
			}
		}
	}
	if len(pending) > 0 {
		emit()
	}
	return err
}

func readStacked(ctx context.Context, path string, o StackedOptions, out chan<- *block, free <-chan []byte) error {
	r, err := readers.OpenRecordFile(path)
	if err != nil {
		return err
	}
	defer r.Close()
	s := newStacker(ctx, o, out, free)
	for {
		if err := s.next(r); errors.Is(err, io.EOF) {
			return s.flush(s.st.TakeBlock())
		} else if err != nil {
			return err
		}
	}
}

// stacker decodes records onto a stack whose blocks come from a free list,
// and sends each block when it is full.
type stacker struct {
	ctx context.Context
	st  *tensor.Stack
	out chan<- *block
}

func newStacker(ctx context.Context, o StackedOptions, out chan<- *block, free <-chan []byte) *stacker {
	st := tensor.NewStack(o.Group)
	st.SetMaxBytes(o.GroupBytes)
	st.SetAlloc(func(int) []byte {
		select {
		case b := <-free:
			return b
		default:
			return nil
		}
	})
	return &stacker{ctx: ctx, st: st, out: out}
}

// next reads a record of r onto the stack; a record that does not stack
// goes as a block of its own. It returns io.EOF at the end of r.
func (s *stacker) next(r *readers.RecordFile) error {
	item, err := r.NextStacked(s.ctx, s.st)
	switch {
	case err != nil:
		return err
	case item != nil:
		return errors.Join(s.flush(s.st.TakeBlock()), s.flush(item, nil))
	case s.st.Full():
		return s.flush(s.st.TakeBlock())
	}
	return nil
}

// flush sends a block, unless there is none.
func (s *stacker) flush(b tensor.Slots, storage []byte) error {
	if b == nil {
		return nil
	}
	n, _ := b.Instances()
	if !send(s.ctx, s.out, &block{slots: b, storage: storage, left: n}) {
		return s.ctx.Err()
	}
	return nil
}

// copyRows copies rows of dense blocks into one batch, in the storage of
// reuse where it fits, fresh otherwise.
func copyRows(reuse tensor.Slots, rows []row) (tensor.Slots, error) {
	out := make(tensor.Slots, len(rows[0].block.slots))
	for s := range out {
		ref := rows[0].block.slots[s]
		shape := ref.Shape().Clone()
		shape[0] = len(rows)
		var t tensor.Tensor
		var err error
		if s < len(reuse) && len(reuse[s].Bytes()) == shape.NumElements()*ref.DType().Size() {
			t, err = tensor.FromBytes(ref.DType(), shape, reuse[s].Bytes())
		} else {
			t, err = tensor.Zeros(ref.DType(), shape)
		}
		if err != nil {
			return nil, err
		}
		data, size := t.Bytes(), len(ref.Bytes())/ref.Rows()
		for i, r := range rows {
			src := r.block.slots[s].Bytes()
			if len(src) != r.block.slots[s].Rows()*size {
				return nil, fmt.Errorf("baseline: slot %d of instance %d is not %d bytes a row", s, i, size)
			}
			copy(data[i*size:(i+1)*size], src[r.index*size:(r.index+1)*size])
		}
		out[s] = tensor.LoDTensor{Tensor: t}
	}
	return out, nil
}

// Touch is the simulated device's work in benchmarks: it reads every byte
// of b, eight at a time, as a device's copy-in would, and returns their
// sum so that the reads cannot be optimised away.
func Touch(b []byte) uint64 {
	var sum uint64
	for len(b) >= 8 {
		sum += binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		sum += uint64(c)
	}
	return sum
}

// stepAll steps every batch until the batch stage closes its channel, and
// returns the samples stepped and the first error of a stage, if any.
func stepAll(ctx context.Context, batches <-chan tensor.Slots, errc <-chan error, step func(tensor.Slots)) (int, error) {
	n := 0
	for b := range batches {
		step(b)
		k, _ := b.Instances()
		n += k
	}
	select {
	case err := <-errc:
		return n, err
	default:
		return n, ctx.Err()
	}
}

// send hands v on unless ctx ends first.
func send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}
