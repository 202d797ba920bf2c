// Package baseline is the hand-written pipeline actorfeed's actor pipeline
// is measured against: the same stages (read and decode RecordIO records,
// window shuffle, batch, a 2-batch prefetch) with one goroutine each and
// channels between them, and nothing else: no supervision, no restarts, no
// protocol. Benchmarks (actors/bench_test.go) and `actorfeed bench` run it
// side by side with the actor pipeline.
//
// baseline may import tensor and readers. Only benchmarks import it.
package baseline

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"

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
				select {
				case shuffled <- s:
				case <-ctx.Done():
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
			select {
			case batches <- out:
				return true
			case <-ctx.Done():
				return false
			}
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
		select {
		case out <- s:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
