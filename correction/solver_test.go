package correction

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type vg struct{ v, g *tensor.Dense }

func (x vg) Value() gorgonia.Value         { return x.v }
func (x vg) Grad() (gorgonia.Value, error) { return x.g, nil }

// TestVelocityFollowsTheFormula steps plain SGD with a constant gradient g,
// so every step changes w by −αg and δ_k = (1−γ^k)·(−αg); the backward
// weights are w − delay·δ.
func TestVelocityFollowsTheFormula(t *testing.T) {
	const alpha, gamma = 0.1, 0.8
	s, err := New(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(alpha)), WithGamma(gamma))
	require.NoError(t, err)
	w := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}))
	g := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0.5, -1, 2}))
	grad := []float64{0.5, -1, 2}
	bw, err := s.BackwardWeights(3)
	require.NoError(t, err)
	require.Nil(t, bw, "no velocity before the first step")
	for k := 1; k <= 5; k++ {
		copy(g.Data().([]float64), grad) // the solver zeroes it
		require.NoError(t, s.Step([]gorgonia.ValueGrad{vg{w, g}}))
		for i, d := range s.Velocity()[0].Data().([]float64) {
			require.InDelta(t, (1-math.Pow(gamma, float64(k)))*(-alpha*grad[i]), d, 1e-15, "step %d", k)
		}
	}
	bw, err = s.BackwardWeights(2)
	require.NoError(t, err)
	wd, dd := w.Data().([]float64), s.Velocity()[0].Data().([]float64)
	for i, u := range bw[0].Data().([]float64) {
		require.InDelta(t, wd[i]-2*dd[i], u, 1e-15)
	}
	none, err := s.BackwardWeights(0)
	require.NoError(t, err)
	require.Nil(t, none)
	require.Equal(t, int64(2*3*8), s.CorrectionBytes())
}

func TestGammaFromD(t *testing.T) {
	s, err := New(gorgonia.NewVanillaSolver(), WithGammaFromD(0.1))
	require.NoError(t, err)
	s.SetDelay(4, false)
	require.InDelta(t, math.Pow(0.1, 0.25), s.Gamma(), 1e-15)
	s.SetDelay(1, true)
	require.InDelta(t, math.Pow(0.1, 0.25), s.Gamma(), 1e-15, "measured delays do not move γ")
	_, err = New(gorgonia.NewVanillaSolver(), WithGamma(1))
	require.Error(t, err)
	_, err = New(gorgonia.NewVanillaSolver(), WithGammaFromD(1.5))
	require.Error(t, err)
	_, err = New(nil)
	require.Error(t, err)
}

func TestFloat32AndModelChanges(t *testing.T) {
	s, err := New(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(1)), WithGamma(0))
	require.NoError(t, err)
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 1}))
	g := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{0.25, -0.5}))
	require.NoError(t, s.Step([]gorgonia.ValueGrad{vg{w, g}}))
	require.Equal(t, []float32{-0.25, 0.5}, s.Velocity()[0].Data(), "γ=0: δ is the last step")
	require.ErrorContains(t, s.Step([]gorgonia.ValueGrad{vg{w, g}, vg{w, g}}), "always pass the same list")
}

// TestBackwardWeightsFollowEveryChange asks for the backward weights the way
// a stage does — several microbatches of one step at the same delay, then
// another delay, a step, a state loaded — and checks each answer against
// w − delay·δ computed afresh, so an answer kept from before a change
// (the buffer is reused while nothing changed) fails it.
func TestBackwardWeightsFollowEveryChange(t *testing.T) {
	s, err := New(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1)), WithGamma(0.5))
	require.NoError(t, err)
	w := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}))
	g := tensor.New(tensor.WithShape(3), tensor.Of(tensor.Float64))
	step := func(grad ...float64) {
		copy(g.Data().([]float64), grad)
		require.NoError(t, s.Step([]gorgonia.ValueGrad{vg{w, g}}))
	}
	check := func(delay int, what string) {
		bw, err := s.BackwardWeights(delay)
		require.NoError(t, err)
		wd, dd := w.Data().([]float64), s.Velocity()[0].Data().([]float64)
		want := make([]float64, len(wd))
		for i := range wd {
			want[i] = wd[i] - float64(delay)*dd[i]
		}
		require.Equal(t, want, bw[0].Data(), what)
	}
	step(0.5, -1, 2)
	check(1, "the first ask")
	check(1, "again at the same delay")
	check(2, "another delay")
	check(1, "the first delay again")
	step(1, 1, -3)
	check(1, "after a step")
	check(1, "after a step, again")
	saved, err := s.SaveState()
	require.NoError(t, err)
	require.NoError(t, s.LoadState(saved))
	copy(w.Data().([]float64), []float64{4, 5, 6}) // the weights restored with it
	check(1, "after a state was loaded")
	step(-2, 0.5, 0.25)
	check(1, "after another step")
	w = tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{-1, 0, 1}))
	require.NoError(t, s.Bind([]gorgonia.ValueGrad{vg{w, g}}))
	check(1, "after Bind to other weights")
}
