// Package batches reads a pipeline's passes as its batches' ids, which
// the scenario harnesses (sim/netsim, sim/objsim) compare with a
// reference run's. It is theirs, and no one else's.
package batches

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/actorfeed/actorfeed/actors"
)

// Passes reads n passes of p (Reset between them) and returns each
// batch's ids, pass by pass; took, when set, is called after each batch.
// It stops at the first error, returning what it read before.
func Passes(ctx context.Context, p *actors.Pipeline, n int, took func()) ([][][]uint64, error) {
	var passes [][][]uint64
	for pass := range n {
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return passes, err
			}
		}
		var ids [][]uint64
		for {
			it, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return passes, err
			}
			ids = append(ids, slices.Clone(it.IDs))
			if took != nil {
				took()
			}
		}
		passes = append(passes, ids)
	}
	return passes, nil
}
