package solvers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// layer is a decorator with every hook, recording what it was told.
type layer struct {
	inner    gorgonia.Solver
	tau      float64
	measured bool
	bw       []gorgonia.Value
	state    int64
}

func (l *layer) Step(m []gorgonia.ValueGrad) error { return l.inner.Step(m) }
func (l *layer) Inner() gorgonia.Solver            { return l.inner }
func (l *layer) SetDelay(tau float64, measured bool) {
	l.tau, l.measured = tau, measured
}
func (l *layer) BackwardWeights(int) ([]gorgonia.Value, error) { return l.bw, nil }
func (l *layer) StateBytes() int64                             { return l.state }
func (l *layer) CorrectionBytes() int64                        { return 2 * l.state }

// TestChainReachesEveryLayer: the hooks reach every layer without any
// layer forwarding them; the first layer with backward weights answers.
func TestChainReachesEveryLayer(t *testing.T) {
	momentum := gorgonia.NewMomentum()
	inner := &layer{inner: momentum, bw: []gorgonia.Value{gorgonia.NewF64(1)}, state: 3}
	outer := &layer{inner: inner, state: 5}
	require.Equal(t, []gorgonia.Solver{outer, inner, momentum}, Chain(outer))
	require.Equal(t, []gorgonia.Solver{momentum}, Chain(momentum))

	SetDelay(outer, 4, true)
	require.Equal(t, 4.0, outer.tau)
	require.Equal(t, 4.0, inner.tau)
	require.True(t, inner.measured)

	bw, err := BackwardWeights(outer, 2)
	require.NoError(t, err)
	require.Equal(t, inner.bw, bw, "the outer layer answers nil, the inner one its weights")
	fw, err := ForwardWeights(outer, 2)
	require.NoError(t, err)
	require.Nil(t, fw)
	require.False(t, HasForwardWeights(outer))

	require.Equal(t, int64(5+3+100), StateBytes(outer, 100), "both layers' own state and Momentum's velocity")
	require.Equal(t, int64(16), CorrectionBytes(outer))
	require.Equal(t, int64(200), StateBytes(gorgonia.NewAdamSolver(), 100))
	require.Zero(t, StateBytes(gorgonia.NewVanillaSolver(), 100))
}
