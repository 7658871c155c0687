package correction

import (
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// grads draws n gradients of size d, the same for every call with a seed.
func grads(seed int64, n, d int) [][]float64 {
	rng := rand.New(rand.NewSource(seed))
	out := make([][]float64, n)
	for k := range out {
		out[k] = make([]float64, d)
		for i := range out[k] {
			out[k][i] = rng.NormFloat64()
		}
	}
	return out
}

// stepAll steps s with the given gradients on w and returns w.
func stepAll(t *testing.T, s gorgonia.Solver, w *tensor.Dense, gs [][]float64) []float64 {
	g := tensor.New(tensor.WithShape(w.Shape()...), tensor.Of(tensor.Float64))
	for _, gk := range gs {
		copy(g.Data().([]float64), gk)
		require.NoError(t, s.Step([]gorgonia.ValueGrad{vg{w, g}}))
	}
	return append([]float64(nil), w.Data().([]float64)...)
}

func newW(d int) *tensor.Dense {
	w := tensor.New(tensor.WithShape(d), tensor.Of(tensor.Float64))
	for i := range w.Data().([]float64) {
		w.Data().([]float64)[i] = float64(i) - 1
	}
	return w
}

// TestSpikeIsTheCompensatedMomentumUpdate checks the decorator around
// gorgonia's Momentum against the paper's form, computed directly:
// v ← βv + g, w ← w − η(β^D·v + (1−β^D)/(1−β)·g).
func TestSpikeIsTheCompensatedMomentumUpdate(t *testing.T) {
	const eta, b, d = 0.05, 0.9, 3
	for _, D := range []float64{1, 2.5, 7} {
		s, err := NewSpike(gorgonia.NewMomentum(gorgonia.WithLearnRate(eta), gorgonia.WithMomentum(b)))
		require.NoError(t, err)
		s.SetDelay(D, false)
		s.SetDelay(1, true) // measured delays do not move D
		require.Equal(t, D, s.Delay())
		require.Equal(t, b, s.Beta())
		gs := grads(1, 40, d)
		got := stepAll(t, s, newW(d), gs)
		want, v := newW(d).Data().([]float64), make([]float64, d)
		a := math.Pow(b, D)
		c := (1 - a) / (1 - b)
		for _, g := range gs {
			for i := range want {
				v[i] = b*v[i] + g[i]
				want[i] -= eta * (a*v[i] + c*g[i])
			}
		}
		require.InDeltaSlice(t, want, got, 1e-12, "D=%g", D)
		ga, gb := s.Coefficients()
		require.InDelta(t, a, ga, 1e-15)
		require.InDelta(t, c, gb, 1e-15)
	}
}

// TestSpikeWithoutDelayIsTheWrappedSolver: D = 0 (and β = 0, SGD) leaves
// every weight bit-identical to the solver it wraps.
func TestSpikeWithoutDelayIsTheWrappedSolver(t *testing.T) {
	gs := grads(2, 30, 4)
	for name, mk := range map[string]func() gorgonia.Solver{
		"momentum": func() gorgonia.Solver {
			return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.1), gorgonia.WithMomentum(0.9))
		},
		"vanilla": func() gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1)) },
	} {
		want := stepAll(t, mk(), newW(4), gs)
		s, err := NewSpike(mk())
		require.NoError(t, err)
		if name == "vanilla" {
			s.SetDelay(5, false) // β = 0: nothing to compensate
		}
		require.Equal(t, want, stepAll(t, s, newW(4), gs), name)
	}
}

func TestSpikeRejectsWhatItCannotCompensate(t *testing.T) {
	_, err := NewSpike(nil)
	require.Error(t, err)
	_, err = NewSpike(gorgonia.NewAdamSolver())
	require.ErrorContains(t, err, "AdamSolver")
	_, err = NewSpike(gorgonia.NewMomentum(gorgonia.WithMomentum(1)))
	require.ErrorContains(t, err, "β < 1")
	s, err := NewSpike(gorgonia.NewMomentum())
	require.NoError(t, err)
	w := newW(2)
	g := tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64))
	require.NoError(t, s.Step([]gorgonia.ValueGrad{vg{w, g}}))
	require.ErrorContains(t, s.Step([]gorgonia.ValueGrad{vg{w, g}, vg{w, g}}), "always pass the same list")
	require.Equal(t, int64(16), s.CorrectionBytes())
}

// TestPredictorExtrapolatesTheLastStep: u_fwd = w + D·(w − w_prev) with the
// default γ = 0, nil before the first step and for no delay.
func TestPredictorExtrapolatesTheLastStep(t *testing.T) {
	p, err := NewPredictor(gorgonia.NewMomentum(gorgonia.WithLearnRate(0.1), gorgonia.WithMomentum(0.9)))
	require.NoError(t, err)
	require.Zero(t, p.Gamma())
	fw, err := p.ForwardWeights(3)
	require.NoError(t, err)
	require.Nil(t, fw, "no step to extrapolate yet")
	w := newW(3)
	gs := grads(3, 5, 3)
	stepAll(t, p, w, gs[:4])
	before := append([]float64(nil), w.Data().([]float64)...)
	stepAll(t, p, w, gs[4:])
	fw, err = p.ForwardWeights(3)
	require.NoError(t, err)
	for i, u := range fw[0].Data().([]float64) {
		x := w.Data().([]float64)[i]
		require.InDelta(t, x+3*(x-before[i]), u, 1e-14)
	}
	none, err := p.ForwardWeights(0)
	require.NoError(t, err)
	require.Nil(t, none)
	bw, err := solvers.BackwardWeights(p, 3)
	require.NoError(t, err)
	require.Nil(t, bw, "a Predictor supplies no backward weights")
}

// TestTheEngineHooksReachEveryDecorator: whatever the order, the engine's
// hooks (solvers.SetDelay, BackwardWeights, ForwardWeights,
// CorrectionBytes, which walk the chain) reach the decorator that serves
// them; no decorator forwards them.
func TestTheEngineHooksReachEveryDecorator(t *testing.T) {
	t2, err := New(gorgonia.NewMomentum(gorgonia.WithLearnRate(0.1)))
	require.NoError(t, err)
	sc, err := NewSpike(t2)
	require.NoError(t, err)
	p, err := NewPredictor(gorgonia.NewMomentum(gorgonia.WithLearnRate(0.1)))
	require.NoError(t, err)
	outer, err := New(p)
	require.NoError(t, err)
	solvers.SetDelay(sc, 4, false)
	require.Equal(t, 4.0, t2.tau, "the delay reaches T2 inside the Spike")
	scInT2, err := NewSpike(gorgonia.NewMomentum())
	require.NoError(t, err)
	t2b, err := New(scInT2)
	require.NoError(t, err)
	solvers.SetDelay(t2b, 3, false)
	require.Equal(t, 3.0, scInT2.Delay(), "the delay reaches a Spike inside T2")
	w := newW(2)
	stepAll(t, sc, w, grads(4, 2, 2))
	bw, err := solvers.BackwardWeights(sc, 2)
	require.NoError(t, err)
	require.NotNil(t, bw, "T2's backward weights under the Spike")
	stepAll(t, outer, newW(2), grads(4, 2, 2))
	fw, err := solvers.ForwardWeights(outer, 2)
	require.NoError(t, err)
	require.NotNil(t, fw, "the Predictor's forward weights under T2")
	require.Equal(t, int64(2*2*8+2*8), solvers.CorrectionBytes(sc), "Spike's g_prev and T2's two buffers")
}
