package correction

import (
	"testing"

	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// decorator is what the state tests need of Spike and Predictor.
type decorator interface {
	gorgonia.Solver
	solvers.Stateful
	SetDelay(float64, bool)
}

// train runs k steps of s on f(w) = Σ (i+1)·w_i²/2 with w of model: each
// forward reads ForwardWeights(2) when s supplies them, and the gradient is
// taken there.
func train(t *testing.T, s gorgonia.Solver, model []gorgonia.ValueGrad, k int) {
	w := model[0].Value().Data().([]float64)
	gv, _ := model[0].Grad()
	g := gv.Data().([]float64)
	for ; k > 0; k-- {
		u := w
		if p, ok := s.(interface {
			ForwardWeights(int) ([]gorgonia.Value, error)
		}); ok {
			fw, err := p.ForwardWeights(2)
			require.NoError(t, err)
			if fw != nil {
				u = fw[0].Data().([]float64)
			}
		}
		for i := range g {
			g[i] = float64(i+1) * u[i] / 4
		}
		require.NoError(t, s.Step(model))
	}
}

func newModel() []gorgonia.ValueGrad {
	return []gorgonia.ValueGrad{vg{newW(3), tensor.New(tensor.WithShape(3), tensor.Of(tensor.Float64))}}
}

// TestSaveAndContinueIsBitIdentical: a decorator rebuilt around the same
// wrapped solver from the State its predecessor saved after k steps
// continues exactly as the uninterrupted one; rebuilt without the State it
// does not (the State is what carries it).
func TestSaveAndContinueIsBitIdentical(t *testing.T) {
	const k = 25
	mom := func() gorgonia.Solver {
		return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.2), gorgonia.WithMomentum(0.9))
	}
	for name, wrap := range map[string]func(gorgonia.Solver) (decorator, error){
		"Spike": func(in gorgonia.Solver) (decorator, error) {
			return NewSpike(in)
		},
		"Predictor": func(in gorgonia.Solver) (decorator, error) { return NewPredictor(in, WithGammaFromD(0.2)) },
	} {
		whole := newModel()
		s, err := wrap(mom())
		require.NoError(t, err)
		s.SetDelay(3, false)
		train(t, s, whole, 2*k)

		run := func(load bool) []float64 {
			model, inner := newModel(), mom()
			first, err := wrap(inner)
			require.NoError(t, err)
			first.SetDelay(3, false)
			train(t, first, model, k)
			st, err := first.SaveState()
			require.NoError(t, err)
			second, err := wrap(inner)
			require.NoError(t, err)
			second.SetDelay(3, false)
			if p, ok := second.(*Predictor); ok {
				_, err := p.ForwardWeights(2)
				require.NoError(t, err, "nothing loaded: a fresh Predictor has no weights to offer")
			}
			if load {
				second.SetDelay(1, false) // the State's delay wins over an earlier announcement
				require.NoError(t, second.LoadState(st))
				if p, ok := second.(*Predictor); ok {
					_, err := p.ForwardWeights(2)
					require.ErrorContains(t, err, "Bind", "restored but not bound")
					require.NoError(t, p.Bind(model))
				}
			}
			train(t, second, model, k)
			return model[0].Value().Data().([]float64)
		}
		want := whole[0].Value().Data().([]float64)
		require.Equal(t, want, run(true), "%s: save and continue", name)
		require.NotEqual(t, want, run(false), "%s: without its State the decorator starts over", name)
	}
}

func TestLoadStateRejectsAnotherSolversState(t *testing.T) {
	sc, err := NewSpike(gorgonia.NewMomentum())
	require.NoError(t, err)
	require.Error(t, sc.LoadState(solvers.State{}))
	model := newModel()
	train(t, sc, model, 2)
	st, err := sc.SaveState()
	require.NoError(t, err)
	p, err := NewPredictor(gorgonia.NewMomentum())
	require.NoError(t, err)
	require.ErrorContains(t, p.LoadState(st), "a correction.Predictor cannot load the state of a correction.Spike")
	train(t, p, newModel(), 2)
	bad := solvers.State{Kind: "correction.Predictor", Tensors: map[string]tensor.Tensor{"delta/0": tensor.New(tensor.WithShape(4), tensor.Of(tensor.Float64))},
		Ints: map[string]int64{"steps": 1}, Floats: map[string]float64{"delay": 2, "gamma": 0}}
	require.ErrorContains(t, p.LoadState(bad), "delta/0", "a δ of another shape")
	sc2, err := NewSpike(gorgonia.NewMomentum())
	require.NoError(t, err)
	train(t, sc2, newModel(), 1)
	st.Tensors["previous_gradient/1"] = st.Tensors["previous_gradient/0"]
	require.ErrorContains(t, sc2.LoadState(st), "the state has slots for 2 learnables, the solver has 1")
}
