package rescheduler

import (
	"math"
	"testing"

	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestDrivesOurSolversAsGorgonias: T1 sets the rate of solvers.SGD,
// Momentum and Adam through LearnRater, and the weights are bit-identical
// to T1 over gorgonia's solver of the same kind.
func TestDrivesOurSolversAsGorgonias(t *testing.T) {
	for name, c := range map[string]struct{ ours, theirs func() gorgonia.Solver }{
		"sgd": {func() gorgonia.Solver { return must(solvers.NewSGD(solvers.WithLearnRate(0.03))) }, gorgoniaSolvers()["vanilla"]},
		"momentum": {func() gorgonia.Solver {
			return must(solvers.NewMomentum(solvers.WithLearnRate(0.03), solvers.WithMomentum(0.9)))
		}, gorgoniaSolvers()["momentum"]},
		"adam": {func() gorgonia.Solver { return must(solvers.NewAdam(solvers.WithLearnRate(0.03))) }, gorgoniaSolvers()["adam"]},
	} {
		run := func(s gorgonia.Solver) []float64 {
			r, err := New(s, WithBase(Cosine(0.03, 0.001, 40)), WithDelay(3), WithPhase(20))
			require.NoError(t, err)
			return stepRandom(t, r, 40)
		}
		want, got := run(c.theirs()), run(c.ours())
		for i := range want {
			require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s weight %d", name, i)
		}
	}
}

func must[S gorgonia.Solver](s S, err error) gorgonia.Solver {
	if err != nil {
		panic(err)
	}
	return s
}

func TestStateRoundTripAndRefusals(t *testing.T) {
	mk := func(opts ...Option) *Solver {
		r, err := New(must(solvers.NewSGD(solvers.WithLearnRate(0.1))), append([]Option{WithPhase(6), UseMeasuredDelay()}, opts...)...)
		require.NoError(t, err)
		return r
	}
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, 2}))
	g := tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64))
	model := []gorgonia.ValueGrad{vg{w, g}}
	a := mk()
	a.SetDelay(1, false)
	require.NoError(t, a.Step(model))
	a.SetDelay(3, false)
	require.NoError(t, a.Step(model))
	a.SetDelay(2.5, true)
	st, err := a.SaveState()
	require.NoError(t, err)
	require.Equal(t, solvers.State{Kind: "rescheduler.Solver",
		Ints:   map[string]int64{"steps": 2, "phase_steps": 1},
		Floats: map[string]float64{"delay": 2.5, "rate": 0.1 / 3}}, st)

	b := mk()
	require.NoError(t, b.LoadState(st))
	require.Equal(t, []any{2, 1, 2.5, 0.1 / 3}, []any{b.Steps(), b.PhaseSteps(), b.Delay(), b.Rate()})
	require.NoError(t, a.Step(model))
	require.NoError(t, b.Step(model))
	require.Equal(t, a.Rate(), b.Rate(), "the next rate is the uninterrupted one")

	edit := func(f func(*solvers.State)) solvers.State {
		c := solvers.State{Kind: st.Kind, Ints: map[string]int64{}, Floats: map[string]float64{}}
		for k, v := range st.Ints {
			c.Ints[k] = v
		}
		for k, v := range st.Floats {
			c.Floats[k] = v
		}
		f(&c)
		return c
	}
	for _, c := range []struct {
		state solvers.State
		want  string
	}{
		{solvers.State{Kind: "solvers.SGD", Ints: map[string]int64{"steps": 1}}, "a rescheduler.Solver cannot load the state of a solvers.SGD"},
		{edit(func(s *solvers.State) { delete(s.Floats, "rate") }), `missing float "rate"`},
		{edit(func(s *solvers.State) { s.Ints["k"] = 1 }), `unknown int "k"`},
		{edit(func(s *solvers.State) { s.Ints["phase_steps"] = 5 }), "5 phase steps out of 2 steps"},
		{edit(func(s *solvers.State) { s.Floats["delay"] = 0.5 }), "delay 0.5 is below 1"},
		{edit(func(s *solvers.State) { s.Floats["rate"] = math.Inf(1) }), `float "rate" is +Inf`},
		{edit(func(s *solvers.State) { s.Tensors = map[string]tensor.Tensor{"x": w} }), "T1 keeps none"},
	} {
		before, err := b.SaveState()
		require.NoError(t, err)
		require.ErrorContains(t, b.LoadState(c.state), c.want)
		after, err := b.SaveState()
		require.NoError(t, err)
		require.Equal(t, before, after, "a failed LoadState changes nothing")
	}
	fixed := mk(WithDelay(4))
	require.ErrorContains(t, fixed.LoadState(st), "the state's delay is 2.5, this Solver's WithDelay(4)")
}
