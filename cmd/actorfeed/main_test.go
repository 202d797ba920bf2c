package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/actorfeed/actorfeed/readers"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"go.uber.org/goleak"
)

// TestMain runs the tests, or, in a process that proc started, the command
// line itself: tests that signal or kill actorfeed drive a real process.
func TestMain(m *testing.M) {
	if os.Getenv(beCLI) == "1" {
		main()
		os.Exit(0)
	}
	// The tests, and the CLIs they start, decode and index into a cache
	// of their own, not the user's.
	goleak.VerifyTestMain(testutil.OwnDir{M: m, Env: readers.DecodeCacheEnv})
}

func demoDefaults() demoOptions {
	return demoOptions{batch: 64, shuffle: 1024, passes: 2, devices: 2, seed: 1, samples: 4000, lr: 0.1, minAccuracy: 0.8, every: time.Hour,
		watch: watchOptions{sampleEvery: 100 * time.Millisecond}}
}

// Without Fashion-MNIST the demo trains on synthetic data, which a linear
// classifier learns almost perfectly when images and labels stay together.
func TestDemoOnSyntheticData(t *testing.T) {
	old := fashionMNIST
	fashionMNIST = t.TempDir() // nothing installed here
	defer func() { fashionMNIST = old }()
	var out bytes.Buffer
	require.NoError(t, runDemo(context.Background(), &out, &bytes.Buffer{}, demoDefaults()))
	require.Contains(t, out.String(), "synthetic, 4000 samples")
	require.Contains(t, out.String(), "pass 2/2: loss")
	require.Contains(t, out.String(), "data wait p95")
	require.Regexp(t, `test accuracy: (0\.9\d+|1\.0000) on 2000 samples`, out.String())
}

// On Fashion-MNIST the demo reaches at least 0.80 within 5 passes (the
// issue's acceptance); CI has the data set installed.
func TestDemoOnFashionMNIST(t *testing.T) {
	testutil.FashionDir(t)
	o := demoDefaults()
	o.passes, o.shuffle = 5, 4096
	var out bytes.Buffer
	require.NoError(t, runDemo(context.Background(), &out, &bytes.Buffer{}, o))
	require.Contains(t, out.String(), "Fashion-MNIST")
	require.Contains(t, out.String(), "300000 samples")
	t.Log(out.String())
}

// Labels shuffled apart from their images cannot be learned: the demo's
// check fails, as it would if a stage misaligned the slots.
func TestDemoFailsOnMisalignedData(t *testing.T) {
	dir := t.TempDir()
	s := synthetic{files: 2, samples: 2000, seed: 3}
	train, err := s.write(t.Context(), filepath.Join(dir, "train"))
	require.NoError(t, err)
	scrambled := synthetic{files: 1, samples: 1000, seed: 99} // other prototypes: labels mean nothing
	test, err := scrambled.write(t.Context(), filepath.Join(dir, "test"))
	require.NoError(t, err)
	o := demoDefaults()
	o.data, o.test = train, test
	err = runDemo(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, o)
	require.ErrorContains(t, err, "test accuracy")
	require.ErrorContains(t, err, "aligned")
}

func TestDemoErrors(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--batch", "0"},
		{"demo", "--nope"},
		{"demo", "--data", filepath.Join(t.TempDir(), "missing.recordio"), "--test", "x.rio"},
		{"demo", "--data", "a.rio"},
	} {
		_, err := cli(t, args...)
		require.Error(t, err, "%v", args)
	}
	_, err := cli(t, "demo", "--batch", "0")
	var ue usageError
	require.True(t, errors.As(err, &ue))
}
