package readers

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The forms WebDataset's shard lists use, as Python's braceexpand expands
// them.
func TestBracesExpandAsBraceexpandDoes(t *testing.T) {
	for in, want := range map[string][]string{
		"plain.tar":                {"plain.tar"},
		"s-{000000..000002}.tar":   {"s-000000.tar", "s-000001.tar", "s-000002.tar"},
		"s-{8..11}.tar":            {"s-8.tar", "s-9.tar", "s-10.tar", "s-11.tar"},
		"s-{08..10}":               {"s-08", "s-09", "s-10"},
		"s-{3..1}":                 {"s-3", "s-2", "s-1"},
		"s-{0..10..5}":             {"s-0", "s-5", "s-10"},
		"s-{-1..1}":                {"s--1", "s-0", "s-1"},
		"{a,b}-{1..2}":             {"a-1", "a-2", "b-1", "b-2"},
		"s3://b/{train,val}/{0,1}": {"s3://b/train/0", "s3://b/train/1", "s3://b/val/0", "s3://b/val/1"},
		"{x{1..2},y}.tar":          {"x1.tar", "x2.tar", "y.tar"},
		"{}{a}":                    {"{}{a}"},
		"a{,b}":                    {"a", "ab"},
		"wds:d/s-{1,2}.tar":        {"wds:d/s-1.tar", "wds:d/s-2.tar"},
		"s-{-9223372036854775808..-9223372036854775808}": {"s--9223372036854775808"},
	} {
		got, err := expandBraces(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

// The same patterns give the same paths as braceexpand, the library
// WebDataset expands shard lists with (Debian's python3-braceexpand; CI
// installs it, elsewhere a machine without it skips).
func TestBracesMatchBraceexpand(t *testing.T) {
	patterns := []string{"s-{000000..000002}.tar", "s-{8..11}.tar", "s-{08..10}", "s-{3..1}", "s-{0..10..5}",
		"{a,b}-{1..2}", "s3://b/{train,val}/{0,1}", "{x{1..2},y}.tar", "{}{a}", "{a{1,2}}", "a{,b}", "{0..2}{a,b}{c,d}", "plain", "s-{-1..1}", "{-5..05}"}
	const py = "/usr/bin/python3"
	script := "import braceexpand, json, sys\nprint(json.dumps([list(braceexpand.braceexpand(p)) for p in json.load(sys.stdin)]))"
	in, err := json.Marshal(patterns)
	require.NoError(t, err)
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil && os.Getenv("CI") == "" {
		t.Skipf("%s with python3-braceexpand: %v", py, err)
	}
	require.NoError(t, err, "CI installs python3-braceexpand")
	var want [][]string
	require.NoError(t, json.Unmarshal(out, &want))
	for i, p := range patterns {
		got, err := expandBraces(p)
		require.NoError(t, err, p)
		require.Equal(t, want[i], got, p)
	}
}

func TestBadBracesSayWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"s-{0..9":                     "leaves the brace at byte 2 open",
		"s-}":                         "closes a brace at byte 2 that it did not open",
		"s-{0..9..0}":                 "the step above 0",
		"s-{0..99999999999999999999}": "want {first..last}",
		"s-{0..2000000}":              "more than 1048576 paths",
		"{0..1023}{0..1023}{0,1}":     "more than 1048576 paths",
		"s-{-9223372036854775808..9223372036854775807}":       "more than 1048576 paths",
		strings.Repeat("d/", 1000) + "{0..99999}":             "more than 67108864",
		strings.Repeat("{", 3000) + strings.Repeat("}", 3000): "more than a path may be",
	} {
		_, err := expandBraces(in)
		require.ErrorIs(t, err, errBraces, in)
		require.ErrorContains(t, err, want, in)
	}
}

// Any string expands without a panic to a bounded list, a string without
// braces to itself, and every path it gives is free of the braces that
// stood for alternatives.
func FuzzExpandBraces(f *testing.F) {
	for _, s := range []string{"s-{000000..000002}.tar", "{a,b}{1..3..2}", "{x{1..2},y}", "{}", "a}", "{-5..05}", "{0..99}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := expandBraces(s)
		if err != nil {
			require.True(t, errors.Is(err, errBraces), "%q: %v", s, err)
			return
		}
		require.LessOrEqual(t, len(got), maxBraceExpansions)
		if !strings.ContainsAny(s, "{}") {
			require.Equal(t, []string{s}, got)
		}
		require.NotEmpty(t, got)
	})
}
