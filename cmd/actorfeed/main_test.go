package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemoOnSyntheticData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syn.recordio")
	require.NoError(t, writeSynthetic(path, 1000, 3))
	var out bytes.Buffer
	err := runDemo(context.Background(), &out, demoOptions{data: path, batch: 64, window: 100, passes: 2, seed: 1, samples: 1000})
	require.NoError(t, err)
	assert.Contains(t, out.String(), "pass 0:   1000 samples")
	assert.Contains(t, out.String(), "pass 1:   1000 samples")
	assert.Contains(t, out.String(), "10 classes")
	assert.Contains(t, out.String(), "summary:  2000 samples, 32 batches")
}

func TestPassCheckerCatchesLossAndDuplication(t *testing.T) {
	c := passChecker{expected: 4}
	require.NoError(t, c.check(0, 4, map[int64]int{0: 2, 1: 2}))
	require.NoError(t, c.check(1, 4, map[int64]int{0: 2, 1: 2}))
	err := c.check(2, 4, map[int64]int{0: 3, 1: 1}) // one lost, one duplicated
	assert.ErrorContains(t, err, "pass 2 delivered per-class counts")
	assert.ErrorContains(t, c.check(3, 3, map[int64]int{0: 2, 1: 1}), "pass 3 delivered 3 samples, the data set holds 4")

	unknown := passChecker{}
	require.NoError(t, unknown.check(0, 7, map[int64]int{5: 7}))
	assert.Error(t, unknown.check(1, 6, map[int64]int{5: 6}))
}

func TestDemoErrors(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--batch", "0"},
		{"demo", "--nope"},
		{"demo", "--data", filepath.Join(t.TempDir(), "missing.recordio")},
		{"demo", "--data", "parquet:/x"},
	} {
		root := newRoot()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		err := root.ExecuteContext(context.Background())
		require.Error(t, err, "%v", args)
		assert.NotContains(t, err.Error(), "\n", "one line: %v", args)
	}
	root := newRoot()
	root.SetArgs([]string{"demo", "--batch", "0"})
	err := root.ExecuteContext(context.Background())
	var ue usageError
	assert.True(t, errors.As(err, &ue))
}
