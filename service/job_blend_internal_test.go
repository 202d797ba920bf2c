package service

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// A job's blend fields become the blend they name; none is no blend, and
// phases or an epoch's positions without weights are refused rather than
// read as no blend.
func TestJobBlendIsTheBlendItNames(t *testing.T) {
	b, err := jobBlend(&messages.ServiceJob{})
	require.NoError(t, err)
	require.Nil(t, b)
	b, err = jobBlend(&messages.ServiceJob{BlendWeights: []float64{1, 2}, BlendSamples: 9,
		BlendPhases: []*messages.ServiceBlendPhase{{From: 5, Weights: []float64{0, 1}}}})
	require.NoError(t, err)
	require.Equal(t, &order.Blend{Weights: []float64{1, 2}, Samples: 9, Phases: []order.Phase{{From: 5, Weights: []float64{0, 1}}}}, b)
	for _, job := range []*messages.ServiceJob{
		{BlendPhases: []*messages.ServiceBlendPhase{{From: 5, Weights: []float64{0, 1}}}},
		{BlendSamples: 9},
	} {
		_, err = jobBlend(job)
		require.ErrorIs(t, err, actors.ErrBadSpec)
	}
}
