package yamlline_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/actorfeed/actorfeed/internal/yamlline"
)

// The library says line 1 of an indentation error on line 4 (the block
// sequence it was in began on line 1); Locate says 4.
func TestLocateFindsTheLineThatGoesWrong(t *testing.T) {
	for _, tc := range []struct {
		text string
		line int
	}{
		{"startup:\n  - op: open_files\n    out: reader\n   attrs: {}\n", 4},
		{"startup:\n  - op: open_files\n    out: reader\n     attrs: {}\n", 4},
		{"a: 1\nb: [1, 2\nc: 3\n", 2},
		{"a: 1\nb:\n  - x\n  - y\n z: 1\nc: 2\n", 5},
	} {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(tc.text), &n)
		require.Error(t, err, tc.text)
		line, msg := yamlline.Locate([]byte(tc.text), err)
		require.Equal(t, tc.line, line, "%q: %v", tc.text, err)
		require.NotContains(t, msg, "yaml: line")
	}
}
