// Package testutil holds the helpers that the tests of several packages
// share: a bounded context, the installed Fashion-MNIST data set, and small
// RecordIO data sets whose every record says where it came from. Only tests
// import it.
package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// Deadline bounds every wait of a test, so a hang fails instead of
// stalling the run.
const Deadline = 30 * time.Second

// Context is the test's context, ended after Deadline.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// FashionDir finds the installed Fashion-MNIST files (or those under
// $ACTORFEED_FASHION_MNIST). CI installs them and sets
// ACTORFEED_REQUIRE_DATASETS=1, so a missing data set fails there instead of
// skipping.
func FashionDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("ACTORFEED_FASHION_MNIST")
	if dir == "" {
		dir = idx.FashionMNISTDir
	}
	if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte.gz")); err != nil {
		if os.Getenv("ACTORFEED_REQUIRE_DATASETS") != "" {
			t.Fatalf("Fashion-MNIST required but missing: %v", err)
		}
		t.Skipf("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): %v", err)
	}
	return dir
}

// Sample is record r of file f of WriteFiles: a value [1,1] int64 =
// f*1e6+r and a label [1,1] int32 = r%10, so that every instance says
// where it came from.
func Sample(f, r int) tensor.Slots {
	return tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(f*1_000_000 + r)})},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int32{int32(r % 10)})},
	}
}

// WriteFiles writes k RecordIO files of n records each (record r of file f
// is Sample(f, r)), in chunks of at most chunk bytes (0: the default), and
// returns their paths.
func WriteFiles(t testing.TB, k, n, chunk int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for f := range k {
		paths = append(paths, WriteRecords(t, filepath.Join(dir, fmt.Sprintf("part-%d.rio", f)), chunk, n,
			func(r int) tensor.Slots { return Sample(f, r) }))
	}
	return paths
}

// WriteRecords writes a RecordIO file of n records, record r being
// sample(r), in chunks of at most chunk bytes (0: the default), and
// returns its path.
func WriteRecords(t testing.TB, path string, chunk, n int, sample func(r int) tensor.Slots) string {
	t.Helper()
	wrote, err := readers.WriteRecordFile(path, recordio.WriterOptions{MaxChunkBytes: chunk},
		readers.Samples(n, func(r int) (tensor.Slots, error) { return sample(r), nil }))
	require.NoError(t, err)
	require.Equal(t, n, wrote)
	return path
}

// FailingReader reads Data and then fails with Err, as a disk that errs
// does.
type FailingReader struct {
	Data []byte
	Err  error
}

func (f *FailingReader) Read(p []byte) (int, error) {
	if len(f.Data) == 0 {
		return 0, f.Err
	}
	n := copy(p, f.Data)
	f.Data = f.Data[n:]
	return n, nil
}

// OwnDir runs m's tests, and the processes they start, with the
// environment variable env naming a directory of their own, removed after
// (unless env is set already): what they cache there (a reader's decoded
// copies and indexes) stays out of the user's cache.
type OwnDir struct {
	M   *testing.M
	Env string
}

func (o OwnDir) Run() int {
	if _, set := os.LookupEnv(o.Env); set {
		return o.M.Run()
	}
	dir, err := os.MkdirTemp("", "actorfeed-"+strings.ToLower(o.Env)+"-")
	if err != nil {
		return o.M.Run()
	}
	defer os.RemoveAll(dir)
	os.Setenv(o.Env, dir)
	return o.M.Run()
}
