package rescheduler

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type vg struct{ v, g *tensor.Dense }

func (x vg) Value() gorgonia.Value         { return x.v }
func (x vg) Grad() (gorgonia.Value, error) { return x.g, nil }

// stepRandom steps s k times on a fixed weight vector with gradients drawn
// from seed, and returns the weights.
func stepRandom(t *testing.T, s gorgonia.Solver, k int) []float64 {
	rng := rand.New(rand.NewSource(1))
	w := tensor.New(tensor.WithShape(16), tensor.WithBacking(make([]float64, 16)))
	g := tensor.New(tensor.WithShape(16), tensor.WithBacking(make([]float64, 16)))
	for i := range w.Data().([]float64) {
		w.Data().([]float64)[i] = rng.NormFloat64()
	}
	model := []gorgonia.ValueGrad{vg{w, g}}
	for step := 0; step < k; step++ {
		for i := range g.Data().([]float64) {
			g.Data().([]float64)[i] = rng.NormFloat64()
		}
		require.NoError(t, s.Step(model))
	}
	return append([]float64(nil), w.Data().([]float64)...)
}

func gorgoniaSolvers() map[string]func() gorgonia.Solver {
	return map[string]func() gorgonia.Solver{
		"vanilla": func() gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.03)) },
		"momentum": func() gorgonia.Solver {
			return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.03), gorgonia.WithMomentum(0.9))
		},
		"adam":    func() gorgonia.Solver { return gorgonia.NewAdamSolver(gorgonia.WithLearnRate(0.03)) },
		"rmsprop": func() gorgonia.Solver { return gorgonia.NewRMSPropSolver(gorgonia.WithLearnRate(0.03)) },
	}
}

// TestNoDelayOrNoPhaseIsTheWrappedSolver: with τ = 1, or K = 0, the decorator
// is bit-identical to the solver it wraps.
func TestNoDelayOrNoPhaseIsTheWrappedSolver(t *testing.T) {
	for name, mk := range gorgoniaSolvers() {
		want := stepRandom(t, mk(), 50)
		for _, opts := range [][]Option{
			{WithDelay(1), WithPhase(100)},
			{WithDelay(7), WithPhase(0)},
			{WithBase(Constant(0.03)), WithDelay(1), WithPhase(100)},
		} {
			r, err := New(mk(), opts...)
			require.NoError(t, err)
			got := stepRandom(t, r, 50)
			for i := range want {
				require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s weight %d", name, i)
			}
		}
	}
}

// TestRatePathEndpoints: stage i starts at α/τ_i and reaches α at step K, for
// both rescales, with every solver.
func TestRatePathEndpoints(t *testing.T) {
	for _, f := range []Rescale{Power{}, Linear{}} {
		for _, tau := range []float64{1, 2, 5, 15} {
			require.InDelta(t, 1/tau, f.Factor(tau, 0, 100), 1e-15)
			require.Equal(t, 1.0, f.Factor(tau, 100, 100))
			require.Equal(t, 1.0, f.Factor(tau, 1000, 100))
			prev := 0.0
			for k := 0; k <= 100; k++ {
				v := f.Factor(tau, k, 100)
				require.GreaterOrEqual(t, v, prev, "monotone")
				prev = v
			}
		}
	}
	require.InDelta(t, math.Pow(4, -0.5), Power{}.Factor(4, 50, 100), 1e-15, "geometric half-way")
	require.InDelta(t, 0.25+0.75*0.5, Linear{}.Factor(4, 50, 100), 1e-15, "linear half-way")

	for name, mk := range gorgoniaSolvers() {
		r, err := New(mk(), WithDelay(4), WithPhase(10))
		require.NoError(t, err)
		stepRandom(t, r, 1)
		require.InDelta(t, 0.03/4, r.Rate(), 1e-15, name)
		stepRandom(t, r, 10)
		require.InDelta(t, 0.03, r.Rate(), 1e-15, name)
	}
}

func TestBaseSchedules(t *testing.T) {
	require.Equal(t, 0.5, Constant(0.5).Rate(1000))
	sd := StepDecay(Constant(1), 10, 0.1)
	require.Equal(t, 1.0, sd.Rate(9))
	require.InDelta(t, 0.1, sd.Rate(10), 1e-15)
	require.InDelta(t, 0.01, sd.Rate(25), 1e-15)
	c := Cosine(1, 0.1, 100)
	require.Equal(t, 1.0, c.Rate(0))
	require.InDelta(t, 0.55, c.Rate(50), 1e-12)
	require.Equal(t, 0.1, c.Rate(100))
	require.Equal(t, 0.1, c.Rate(1000))
	w := Warmup(Constant(1), 4)
	require.Equal(t, []float64{0.25, 0.5, 0.75, 1, 1}, []float64{w.Rate(0), w.Rate(1), w.Rate(2), w.Rate(3), w.Rate(4)})
	// Composable: warm-up into a step decay.
	wd := Warmup(StepDecay(Constant(1), 10, 0.5), 2)
	require.Equal(t, 0.5, wd.Rate(0))
	require.Equal(t, 0.5, wd.Rate(10))
	ms := Milestones(Constant(1), 0.1, 30, 60)
	require.Equal(t, []float64{1, 0.1, 0.1, 0.010000000000000002}, []float64{ms.Rate(29), ms.Rate(30), ms.Rate(59), ms.Rate(60)})
}

func TestNewRejectsWhatItCannotDrive(t *testing.T) {
	_, err := New(gorgonia.NewAdaGradSolver())
	require.ErrorContains(t, err, "AdaGradSolver")
	_, err = New(nil)
	require.Error(t, err)
	_, err = New(gorgonia.NewVanillaSolver(), WithDelay(0.5))
	require.ErrorContains(t, err, "at least 1")
	_, err = New(gorgonia.NewVanillaSolver(), WithPhase(-1))
	require.Error(t, err)
	_, err = New(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1)), WithDelay(4))
	require.ErrorContains(t, err, "WithPhase is required: T1 needs its length K", "no silent K = 0")
}

func TestSetDelay(t *testing.T) {
	r, err := New(gorgonia.NewVanillaSolver(), WithPhase(0))
	require.NoError(t, err)
	r.SetDelay(3, false)
	require.Equal(t, 3.0, r.Delay())
	r.SetDelay(2.5, true)
	require.Equal(t, 3.0, r.Delay(), "measured delays are ignored unless asked for")
	m, err := New(gorgonia.NewVanillaSolver(), UseMeasuredDelay(), WithPhase(0))
	require.NoError(t, err)
	m.SetDelay(2.5, true)
	require.Equal(t, 2.5, m.Delay())
	m.SetDelay(0, true)
	require.Equal(t, 1.0, m.Delay())
	f, err := New(gorgonia.NewVanillaSolver(), WithDelay(5), UseMeasuredDelay(), WithPhase(0))
	require.NoError(t, err)
	f.SetDelay(2, false)
	require.Equal(t, 5.0, f.Delay(), "a fixed delay stays")
}

// TestSynchronousStepsLeaveThePhase: steps taken while the engine announces
// τ = 1 (a synchronous warm-up) run at the base rate and do not count
// towards K; the phase starts at α/τ when the delay arrives.
func TestSynchronousStepsLeaveThePhase(t *testing.T) {
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))
	g := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.5, 0.5}))
	model := []gorgonia.ValueGrad{vg{w, g}}
	r, err := New(gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.1)), WithBase(Constant(0.1)), WithPhase(4))
	require.NoError(t, err)
	r.SetDelay(1, false)
	for k := 0; k < 3; k++ {
		require.NoError(t, r.Step(model))
		require.Equal(t, 0.1, r.Rate())
	}
	require.Zero(t, r.PhaseSteps())
	r.SetDelay(4, false)
	var rates []float64
	for k := 0; k < 6; k++ {
		require.NoError(t, r.Step(model))
		rates = append(rates, r.Rate())
	}
	require.Equal(t, 6, r.PhaseSteps())
	require.Equal(t, 9, r.Steps())
	for k, want := range []float64{0.1 / 4, 0.1 * math.Pow(4, -0.75), 0.1 * math.Pow(4, -0.5), 0.1 * math.Pow(4, -0.25), 0.1, 0.1} {
		require.InDelta(t, want, rates[k], 1e-15, "asynchronous step %d", k)
	}
}
