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
		{mk(WithGammaFromD(0.2)), func(s *solvers.State) { s.Tensors = nil }, "the state has 2 steps but no δ"},
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
