package program

import (
	"cmp"
	"fmt"
	"math"

	"github.com/actorfeed/actorfeed/readers/order"
)

// blend is open_files' blend (actors.Files.Blend) over files: its
// weights, one a file in file_names' order, blend_samples (an epoch's
// samples, 0 for the files' records together) and weight_phases, each
// {step: STEP, weights: [...]}, the weights from a global step on (the
// steps, actors.Files.BlendSteps), or each {from: POSITION, weights:
// [...]}, from a position of the run (epoch times blend_samples plus the
// position in the epoch) on. It is nil without weights.
func (c *opCtx) blend(files int) (*order.Blend, []uint64, error) {
	v, ok := c.op.Attrs["weights"]
	if !ok {
		for _, a := range []string{"blend_samples", "weight_phases"} {
			if _, ok := c.op.Attrs[a]; ok {
				return nil, nil, c.fail("attribute "+a, "weights beside it (a blend's weights, one a file)", c.op.Attrs[a])
			}
		}
		return nil, nil, nil
	}
	w, err := c.weights("weights", v, files)
	if err != nil {
		return nil, nil, err
	}
	samples, err := c.integer("blend_samples", 0, 0, fmt.Sprintf("an integer from 0 to %d (an epoch's samples; 0: the files' records together)", order.MaxBlendSamples))
	if err != nil {
		return nil, nil, err
	}
	if samples > order.MaxBlendSamples {
		return nil, nil, c.fail("attribute blend_samples", fmt.Sprintf("an integer from 0 to %d", order.MaxBlendSamples), samples)
	}
	b := &order.Blend{Weights: w, Samples: uint64(samples)}
	var steps []uint64
	if v, ok := c.op.Attrs["weight_phases"]; ok {
		list, ok := asList(v)
		want := fmt.Sprintf("a list of at most %d phases, each {step: a global step >= 1, weights: [one a file]} (or each {from: a position of the run >= 1, ...})", order.MaxBlendPhases)
		if !ok || len(list) > order.MaxBlendPhases {
			return nil, nil, c.fail("attribute weight_phases", want, v)
		}
		first := ""
		for i, x := range list {
			m, ok := x.(map[string]any)
			key := "from"
			if _, isStep := m["step"]; isStep {
				key = "step"
			}
			first = cmp.Or(first, key)
			at, aok := asInt(m[key])
			if !ok || !aok || at < 1 || key != first { // every phase at a step, or every one at a position
				return nil, nil, c.fail(fmt.Sprintf("attribute weight_phases[%d]", i), want, x)
			}
			pw, err := c.weights(fmt.Sprintf("weight_phases[%d].weights", i), m["weights"], files)
			if err != nil {
				return nil, nil, err
			}
			p := order.Phase{Weights: pw}
			if key == "step" {
				steps = append(steps, uint64(at))
			} else {
				p.From = uint64(at)
			}
			b.Phases = append(b.Phases, p)
		}
	}
	return b, steps, nil
}

// weights is a list of files numbers of at least 0, finite.
func (c *opCtx) weights(name string, v any, files int) ([]float64, error) {
	want := fmt.Sprintf("a list of %d numbers >= 0 (a weight for each of the %d files), not all 0", files, files)
	list, ok := asList(v)
	if !ok {
		if fs, isF := v.([]float64); isF {
			list = make([]any, len(fs))
			for i, f := range fs {
				list[i] = f
			}
			ok = true
		}
	}
	if !ok || len(list) != files {
		return nil, c.fail("attribute "+name, want, v)
	}
	out := make([]float64, files)
	var sum float64
	for i, x := range list {
		f, ok := x.(float64)
		if n, isInt := asInt(x); isInt {
			f, ok = float64(n), true
		}
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return nil, c.fail("attribute "+name, want, v)
		}
		out[i], sum = f, sum+f
	}
	if sum <= 0 {
		return nil, c.fail("attribute "+name, want, v)
	}
	return out, nil
}
