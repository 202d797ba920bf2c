package actors_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// panicking is a reader whose every Next panics.
type panicking struct{}

func (panicking) Next(context.Context) (tensor.Slots, error) { panic("boom") }
func (panicking) Reset() error                               { return nil }
func (panicking) Close() error                               { return nil }

// A source that panicked at every read restarted its reader twice and then
// hung ("0 samples, restarts 2", no error): each panic lost one of the
// reader's ReaderWindow read-ahead slots. A restart storm ends in the
// intensity error, whatever stage panics.
func TestRestartStormEndsInTheIntensityError(t *testing.T) {
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Generator{Name: "g", New: func() (readers.Reader, error) { return panicking{}, nil }}, actors.Batch{Size: 4}},
		actors.Options{System: sys})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Next(testutil.Context(t))
	require.ErrorIs(t, err, supervisor.ErrRestartIntensity)
}

// Records of mixed shapes, with no slots declared, failed in the batch
// stage naming no file or record. The error names the record that broke
// the batch.
func TestMixedShapesNameTheRecordThatBrokeTheBatch(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, width := range []int{4, 5} {
		path := filepath.Join(dir, fmt.Sprintf("w%d.recordio", width))
		_, err := readers.WriteRecordFile(path, recordio.WriterOptions{}, readers.Samples(3, func(int) (tensor.Slots, error) {
			return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, width}, make([]float32, width))}}, nil
		}))
		require.NoError(t, err)
		paths = append(paths, path)
	}
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 6}}, actors.Options{System: sys})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Next(testutil.Context(t))
	require.ErrorIs(t, err, tensor.ErrShape)
	require.ErrorContains(t, err, "record 0 of "+paths[1])
	require.ErrorContains(t, err, "record 0 of "+paths[0]+", the first of its batch")
}
