package solvers_test

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ours are our solvers, each with options that give it state to lose.
func ours() map[string]func() gorgonia.Solver {
	return map[string]func() gorgonia.Solver{
		"SGD": func() gorgonia.Solver { return must(solvers.NewSGD(solvers.WithLearnRate(0.05))) },
		"Momentum": func() gorgonia.Solver {
			return must(solvers.NewMomentum(solvers.WithLearnRate(0.03), solvers.WithMomentum(0.9), solvers.WithL2Reg(1e-3)))
		},
		"Adam": func() gorgonia.Solver {
			return must(solvers.NewAdam(solvers.WithLearnRate(0.01), solvers.WithClip(0.5)))
		},
	}
}

// copyWeights sets dst's learnables to src's values, in place.
func copyWeights(t *testing.T, dst, src gorgonia.Nodes) {
	t.Helper()
	for i, n := range dst {
		switch v := n.Value().(type) {
		case *gorgonia.F32:
			*v = *src[i].Value().(*gorgonia.F32)
		case *gorgonia.F64:
			*v = *src[i].Value().(*gorgonia.F64)
		case tensor.Tensor:
			require.NoError(t, tensorutil.CopyInto(v, src[i].Value()))
		}
	}
}

// resumes trains n steps without a break, and k steps, saves, then
// continues n−k steps in a freshly built model with a fresh solver that
// loaded the saved state (and the weights); the weights must be
// bit-identical. bind binds the fresh solver before it loads.
func resumes(t *testing.T, mk func() *trainee, solver func() gorgonia.Solver, k, n int, bind bool) {
	t.Helper()
	whole, first, rest := mk(), mk(), mk()
	whole.step(t, solver(), 0, n)

	s := solver()
	first.step(t, s, 0, k)
	states, err := solvers.Save(s)
	require.NoError(t, err)

	copyWeights(t, rest.learnables, first.learnables)
	fresh := solver()
	if bind {
		require.NoError(t, solvers.Bind(fresh, rest.model()))
	}
	require.NoError(t, solvers.Load(fresh, states))
	rest.step(t, fresh, k, n-k)
	requireSameBits(t, bits(t, whole.learnables), bits(t, rest.learnables), rest.learnables, "resumed")

	// The check can fail: a solver that forgot its state does not continue.
	forgot := mk()
	copyWeights(t, forgot.learnables, first.learnables)
	forgot.step(t, solver(), k, n-k)
	if _, sgd := s.(*solvers.SGD); !sgd {
		require.NotEqual(t, bits(t, whole.learnables), bits(t, forgot.learnables), "a fresh solver does not continue the run")
	}
}

func TestSavedStateContinuesBitIdentically(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	for name, solver := range ours() {
		t.Run(name+"/zoo mlp", func(t *testing.T) {
			resumes(t, func() *trainee { return zooTrainee(t, "mlp", 16) }, solver, 3, 6, false)
		})
		t.Run(name+"/float64 cnn, bound first", func(t *testing.T) {
			resumes(t, func() *trainee { return testmodelTrainee(t, "cnn", tensor.Float64) }, solver, 4, 9, true)
		})
		t.Run(name+"/scalars", func(t *testing.T) {
			resumes(t, func() *trainee { return scalarTrainee(t, tensor.Float32) }, solver, 5, 12, false)
		})
	}
}

// snapshot is a State's content, for checking that nothing changed.
func snapshot(t *testing.T, s gorgonia.Solver) []solvers.State {
	t.Helper()
	st, err := solvers.Save(s)
	require.NoError(t, err)
	return st
}

func TestLoadStateRefusesMismatchesAndChangesNothing(t *testing.T) {
	tr := zooTrainee(t, "mlp", 16)
	mom := ours()["Momentum"]()
	tr.step(t, mom, 0, 2)
	good, err := mom.(solvers.Stateful).SaveState()
	require.NoError(t, err)

	other := testmodelTrainee(t, "mlp", tensor.Float64)
	adam := ours()["Adam"]()
	other.step(t, adam, 0, 1)
	adamState, err := adam.(solvers.Stateful).SaveState()
	require.NoError(t, err)

	edit := func(f func(st *solvers.State)) solvers.State {
		st := solvers.State{Kind: good.Kind, Ints: map[string]int64{}, Floats: map[string]float64{}, Tensors: map[string]tensor.Tensor{}}
		for k, v := range good.Ints {
			st.Ints[k] = v
		}
		for k, v := range good.Tensors {
			st.Tensors[k] = v
		}
		f(&st)
		return st
	}
	wrongShape := tensor.New(tensor.WithShape(3, 4), tensor.Of(tensor.Float32))
	wrongDtype, err := tensorutil.Clone(tensor.New(tensor.WithShape(good.Tensors["velocity/1"].Shape()...), tensor.Of(tensor.Float64)))
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		state solvers.State
		want  string
	}{
		{"another kind", adamState, "a solvers.Momentum cannot load the state of a solvers.Adam"},
		{"no kind", edit(func(st *solvers.State) { st.Kind = "" }), "cannot load the state of a solver of no kind"},
		{"a shape", edit(func(st *solvers.State) { st.Tensors["velocity/2"] = wrongShape }), `velocity/2 is (3, 4) float32; learnable 2 is (256, 128) float32`},
		{"a dtype", edit(func(st *solvers.State) { st.Tensors["velocity/1"] = wrongDtype }), `velocity/1 is (1, 256) float64; learnable 1 is (1, 256) float32`},
		{"a missing tensor", edit(func(st *solvers.State) { delete(st.Tensors, "velocity/3") }), `missing tensor "velocity/3"`},
		{"the last tensor", edit(func(st *solvers.State) { delete(st.Tensors, "velocity/5") }), "the state has slots for 5 learnables, the solver has 6"},
		{"an unknown tensor", edit(func(st *solvers.State) { st.Tensors["mean/0"] = good.Tensors["velocity/0"] }), `unexpected tensor "mean/0"`},
		{"a missing int", edit(func(st *solvers.State) { delete(st.Ints, "steps") }), `missing int "steps"`},
		{"an unknown float", edit(func(st *solvers.State) { st.Floats["eta"] = 1 }), `unknown float "eta"`},
		{"a negative count", edit(func(st *solvers.State) { st.Ints["steps"] = -1 }), `int "steps" is -1`},
		{"steps without tensors", edit(func(st *solvers.State) { st.Tensors = nil }), "solvers: solvers.Momentum state: the state holds no slot (a solver that stepped no learnables), the solver has 6 learnables"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, mom)
			require.ErrorContains(t, mom.(solvers.Stateful).LoadState(c.state), c.want)
			require.Equal(t, before, snapshot(t, mom), "a failed LoadState changes nothing")
		})
	}

	// A fresh solver that is not bound learns its shapes from the State,
	// then refuses a model of other shapes at its first step.
	fresh := ours()["Momentum"]()
	require.NoError(t, fresh.(solvers.Stateful).LoadState(good))
	err = fresh.Step(other.model())
	require.ErrorContains(t, err, "learnable 0 (mlp.fc1.W) is (16, 16) float64; the solver was bound to (784, 256) float32")
}

// TestNoLearnablesSaveAndLoad: a solver stepping a model of no learnables
// (a pipeline stage that owns none) saves its step count, and a fresh
// solver bound to no learnables loads it (CheckState agreeing) and saves
// the same State again; one bound to learnables refuses it.
func TestNoLearnablesSaveAndLoad(t *testing.T) {
	all := ours()
	all["NAdam"] = func() gorgonia.Solver { return must(solvers.NewNAdam()) }
	for name, mk := range all {
		t.Run(name, func(t *testing.T) {
			s := mk()
			for range 3 {
				require.NoError(t, s.Step(nil))
			}
			st, err := s.(solvers.Stateful).SaveState()
			require.NoError(t, err)

			fresh := mk()
			require.NoError(t, solvers.Bind(fresh, nil))
			require.NoError(t, fresh.(solvers.Stateful).CheckState(st))
			require.NoError(t, fresh.(solvers.Stateful).LoadState(st))
			again, err := fresh.(solvers.Stateful).SaveState()
			require.NoError(t, err)
			require.Equal(t, st, again)

			unbound := mk()
			require.NoError(t, unbound.(solvers.Stateful).LoadState(st), "an unbound solver learns from the State that it has no learnables")
			if name != "SGD" { // SGD keeps nothing per learnable
				tr := zooTrainee(t, "mlp", 16)
				require.ErrorContains(t, solvers.Bind(unbound, tr.model()), "bound to 0 learnables, now given 6")
				bound := mk()
				require.NoError(t, solvers.Bind(bound, tr.model()))
				require.ErrorContains(t, bound.(solvers.Stateful).CheckState(st), "the state holds no slot (a solver that stepped no learnables), the solver has 6 learnables")
				require.ErrorContains(t, bound.(solvers.Stateful).LoadState(st), "the solver has 6 learnables")
			}
		})
	}
}
