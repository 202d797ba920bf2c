package program_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/program"
)

// open_files' blend attributes are refused by name before anything is
// read: weights that are not one a file, phases out of order or mixing
// steps with positions, blend attributes without weights.
func TestOpenFilesRefusesBadBlends(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 10, 300)
	for name, c := range map[string]struct {
		attrs map[string]any
		field string
	}{
		"a weight short":        {map[string]any{"weights": []any{1.0}}, "attribute weights"},
		"a negative weight":     {map[string]any{"weights": []any{1.0, -2}}, "attribute weights"},
		"all zero":              {map[string]any{"weights": []any{0, 0}}, "attribute weights"},
		"samples alone":         {map[string]any{"blend_samples": 10}, "attribute blend_samples"},
		"phases without a step": {map[string]any{"weights": []any{1, 1}, "weight_phases": []any{map[string]any{"weights": []any{1, 0}}}}, "attribute weight_phases[0]"},
		"steps and positions": {map[string]any{"weights": []any{1, 1}, "weight_phases": []any{
			map[string]any{"step": 3, "weights": []any{1, 0}}, map[string]any{"from": 90, "weights": []any{0, 1}}}}, "attribute weight_phases[1]"},
		"a phase's weights short": {map[string]any{"weights": []any{1, 1}, "weight_phases": []any{map[string]any{"step": 3, "weights": []any{1}}}}, "attribute weight_phases[0].weights"},
	} {
		attrs := map[string]any{"file_names": paths}
		for k, v := range c.attrs {
			attrs[k] = v
		}
		s := program.NewScope(actors.Options{})
		err := s.Run(ctx, &program.Program{Ops: []program.Op{{Type: "open_files", Out: []string{"r"}, Attrs: attrs}}})
		var opErr *program.OpError
		require.ErrorAs(t, err, &opErr, name)
		require.Equal(t, c.field, opErr.Field, name)
		require.NoError(t, s.Close())
	}
}
