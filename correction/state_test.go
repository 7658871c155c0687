package correction

import (
	"testing"

	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestStateRoundTripAndRefusals(t *testing.T) {
	newModel := func() []gorgonia.ValueGrad {
		return []gorgonia.ValueGrad{vg{
			tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3})),
			tensor.New(tensor.WithShape(3), tensor.Of(tensor.Float64)),
		}}
	}
	step := func(s *Solver, model []gorgonia.ValueGrad) {
		copy(model[0].(vg).g.Float64s(), []float64{0.5, -1, 2})
		require.NoError(t, s.Step(model))
	}
	mk := func(opts ...Option) *Solver {
		sgd, err := solvers.NewSGD(solvers.WithLearnRate(0.1))
		require.NoError(t, err)
		s, err := New(sgd, opts...)
		require.NoError(t, err)
		return s
	}
	a, model := mk(WithGammaFromD(0.2)), newModel()
	a.SetDelay(2, false)
	step(a, model)
	step(a, model)
	st, err := a.SaveState()
	require.NoError(t, err)
	require.Equal(t, "correction.Solver", st.Kind)
	require.Equal(t, map[string]int64{"steps": 2}, st.Ints)
	require.Equal(t, map[string]float64{"delay": 2, "gamma": a.Gamma()}, st.Floats)
	require.Equal(t, a.Velocity()[0].Data(), st.Tensors["delta/0"].Data())

	b, resumed := mk(WithGammaFromD(0.2)), newModel()
	copy(resumed[0].(vg).v.Float64s(), model[0].(vg).v.Float64s())
	require.NoError(t, b.Bind(resumed))
	require.NoError(t, b.LoadState(st))
	step(a, model)
	step(b, resumed)
	require.Equal(t, a.Velocity()[0].Data(), b.Velocity()[0].Data())
	wa, err := a.BackwardWeights(2)
	require.NoError(t, err)
	wb, err := b.BackwardWeights(2)
	require.NoError(t, err)
	require.Equal(t, wa[0].Data(), wb[0].Data())

	for _, c := range []struct {
		into *Solver
		edit func(*solvers.State)
		want string
	}{
		{mk(WithGamma(0.5)), nil, "the state's γ is 0.4472135954999579, this Solver's 0.5"},
		{mk(WithGammaFromD(0.3)), nil, "this Solver's 0.5477225575051661"},
		{mk(WithGammaFromD(0.2)), func(s *solvers.State) { s.Tensors = nil }, "correction: state: the state holds no slot (a solver that stepped no learnables), the solver has 1 learnables"},
		{mk(WithGammaFromD(0.2)), func(s *solvers.State) { s.Floats["delay"] = 0 }, "delay 0 is below 1"},
		{mk(WithGammaFromD(0.2)), func(s *solvers.State) { delete(s.Ints, "steps") }, `missing int "steps"`},
		{mk(WithGammaFromD(0.2)), func(s *solvers.State) {
			s.Tensors = map[string]tensor.Tensor{"delta/0": tensor.New(tensor.WithShape(4), tensor.Of(tensor.Float64))}
		}, "delta/0 is (4) float64; learnable 0 is (3) float64"},
	} {
		c.into.SetDelay(2, false)
		require.NoError(t, c.into.Bind(newModel()))
		s := solvers.State{Kind: st.Kind, Tensors: st.Tensors, Ints: map[string]int64{"steps": 2}, Floats: map[string]float64{"delay": 2, "gamma": st.Floats["gamma"]}}
		if c.edit != nil {
			c.edit(&s)
		}
		before, err := c.into.SaveState()
		require.NoError(t, err)
		require.ErrorContains(t, c.into.LoadState(s), c.want)
		after, err := c.into.SaveState()
		require.NoError(t, err)
		require.Equal(t, before, after, "a failed LoadState changes nothing")
	}
}

// TestNoLearnablesSaveAndLoad: T2, its Predictor and Spike over a stage
// that owns no learnable save their step count, and fresh ones bound to no
// learnables load it (CheckState agreeing); one bound to learnables
// refuses it.
func TestNoLearnablesSaveAndLoad(t *testing.T) {
	mom := func() gorgonia.Solver { return must(solvers.NewMomentum(solvers.WithLearnRate(0.1))) }
	for name, mk := range map[string]func() decorator{
		"Solver":    func() decorator { return must(New(mom(), WithGammaFromD(0.2))) },
		"Predictor": func() decorator { return must(NewPredictor(mom())) },
		"Spike":     func() decorator { return must(NewSpike(mom())) },
	} {
		t.Run(name, func(t *testing.T) {
			s := mk()
			s.SetDelay(2, false)
			for range 3 {
				require.NoError(t, s.Step(nil))
			}
			states, err := solvers.Save(s)
			require.NoError(t, err)

			fresh := mk()
			fresh.SetDelay(2, false)
			require.NoError(t, solvers.Bind(fresh, nil))
			require.NoError(t, solvers.Check(fresh, states))
			require.NoError(t, solvers.Load(fresh, states))
			again, err := solvers.Save(fresh)
			require.NoError(t, err)
			require.Equal(t, states, again)

			bound := mk()
			bound.SetDelay(2, false)
			require.NoError(t, solvers.Bind(bound, newModel()))
			require.ErrorContains(t, solvers.Check(bound, states), "the solver has 1 learnables")
			require.ErrorContains(t, solvers.Load(bound, states), "the solver has 1 learnables")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
