package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/actorfeed/actorfeed/readers/order"
)

// blendFlags are run's and feed's flags of a weighted mixture of the
// --data files (docs/tokens.md, "Weighted mixtures").
type blendFlags struct {
	weights []float64
	from    []string // STEP:W,W,...
	samples uint64
	phases  []stepWeights // from, parsed by check
}

// stepWeights is a parsed --weights-from: the weights from a global step on.
type stepWeights struct {
	step    uint64
	weights []float64
}

func (b *blendFlags) flags(f *pflag.FlagSet) {
	f.Float64SliceVar(&b.weights, "weights", nil, "blend the --data files in these proportions, one weight a file in --data's order (0.7,0.3): every epoch's samples are drawn from the files by a deterministic rule, and a file that runs out starts its next epoch; implies --shuffle all unless --shuffle 0 (docs/tokens.md)")
	f.StringArrayVar(&b.from, "weights-from", nil, "from global step STEP on, blend with these weights instead, STEP:W,W,... (repeat for a curriculum; needs --global-batch)")
	f.Uint64Var(&b.samples, "blend-samples", 0, "the samples of a blended epoch (default: the files' samples together)")
}

// check checks the blend's flags against files, the --data files as
// expanded, and whether --global-batch is set.
func (b *blendFlags) check(files int, globalBatch bool) error {
	if len(b.weights) == 0 {
		switch {
		case len(b.from) > 0:
			return fmt.Errorf("--weights-from changes the weights of --weights: give --weights")
		case b.samples > 0:
			return fmt.Errorf("--blend-samples is the epoch of a blend: give --weights")
		}
		return nil
	}
	if len(b.weights) != files {
		return fmt.Errorf("--weights gives %d weights and --data names %d files: give one weight a file, in --data's order (a glob or brace list names a file each)", len(b.weights), files)
	}
	if b.samples > order.MaxBlendSamples {
		return fmt.Errorf("--blend-samples %d is out of range: at most %d", b.samples, uint64(order.MaxBlendSamples))
	}
	if len(b.from) > 0 && !globalBatch {
		return fmt.Errorf("--weights-from names global steps, so it needs --global-batch (a step is then the same samples on any world)")
	}
	if len(b.from) > order.MaxBlendPhases {
		return fmt.Errorf("--weights-from is given %d times, at most %d", len(b.from), order.MaxBlendPhases)
	}
	b.phases = b.phases[:0]
	last := uint64(0)
	for _, s := range b.from {
		step, w, err := parseWeightsFrom(s, files)
		if err != nil {
			return err
		}
		if step <= last {
			return fmt.Errorf("--weights-from %s: step %d is not after the step before it (%d): give the phases in increasing steps", s, step, last)
		}
		last = step
		b.phases = append(b.phases, stepWeights{step, w})
	}
	return nil
}

// parseWeightsFrom parses STEP:W,W,... with files weights.
func parseWeightsFrom(s string, files int) (uint64, []float64, error) {
	at, list, ok := strings.Cut(s, ":")
	step, err := strconv.ParseUint(at, 10, 64)
	if !ok || err != nil || step < 1 {
		return 0, nil, fmt.Errorf("--weights-from %q: want STEP:W,W,... with a global step >= 1", s)
	}
	parts := strings.Split(list, ",")
	if len(parts) != files {
		return 0, nil, fmt.Errorf("--weights-from %s: %d weights for %d files", s, len(parts), files)
	}
	w := make([]float64, files)
	var sum float64
	for i, p := range parts {
		if w[i], err = strconv.ParseFloat(strings.TrimSpace(p), 64); err != nil || !(w[i] >= 0) || w[i] > 1e300 {
			return 0, nil, fmt.Errorf("--weights-from %s: weight %q is not a number >= 0", s, p)
		}
		sum += w[i]
	}
	if sum <= 0 {
		return 0, nil, fmt.Errorf("--weights-from %s: every weight is 0: give a file a positive weight", s)
	}
	return step, w, nil
}

// blend is the blend the flags give (after check) and the global steps
// its phases start at.
func (b *blendFlags) blend() (*order.Blend, []uint64) {
	out := &order.Blend{Weights: b.weights, Samples: b.samples}
	var steps []uint64
	for _, p := range b.phases {
		out.Phases = append(out.Phases, order.Phase{Weights: p.weights})
		steps = append(steps, p.step)
	}
	return out, steps
}

// attrs are open_files' attributes of the blend (after check).
func (b *blendFlags) attrs() map[string]any {
	if len(b.weights) == 0 {
		return nil
	}
	m := map[string]any{"weights": b.weights, "blend_samples": int(b.samples)}
	var phases []any
	for _, p := range b.phases {
		phases = append(phases, map[string]any{"step": int(p.step), "weights": p.weights})
	}
	if len(phases) > 0 {
		m["weight_phases"] = phases
	}
	return m
}
