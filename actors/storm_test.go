package actors_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
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
	_, _, err = p.Next(testCtx(t))
	require.ErrorIs(t, err, supervisor.ErrRestartIntensity)
}
