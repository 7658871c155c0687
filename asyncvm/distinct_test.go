package asyncvm

import (
	"testing"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestOneSolverForTwoStagesIsRefused: a factory that hands several stages
// the same solver — itself, or inside decorators built anew per stage —
// makes New fail naming both stages and the fix, before any stage runs
// (the stages would otherwise step one solver from two goroutines). A
// factory building a new chain per stage is accepted.
func TestOneSolverForTwoStagesIsRefused(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	shared, err := solvers.NewMomentum(solvers.WithLearnRate(0.05))
	require.NoError(t, err)
	gshared := gorgonia.NewMomentum()
	for _, c := range []struct {
		name    string
		factory func(int) (gorgonia.Solver, error)
		want    string
	}{
		{"the same solver", func(int) (gorgonia.Solver, error) { return shared, nil },
			"asyncvm: stages 0 and 1 were given the same solver (layer 0 of stage 1's, a *solvers.Momentum)"},
		{"gorgonia's, the same", func(int) (gorgonia.Solver, error) { return gshared, nil },
			"stages 0 and 1 were given the same solver (layer 0 of stage 1's, a *gorgonia.Momentum)"},
		{"new decorators around the same solver", func(i int) (gorgonia.Solver, error) {
			if i == 0 {
				return solvers.NewSGD()
			}
			t2, err := correction.New(shared)
			if err != nil {
				return nil, err
			}
			return rescheduler.New(t2, rescheduler.WithPhase(4))
		}, "stages 1 and 2 were given the same solver (layer 2 of stage 2's, a *solvers.Momentum)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vm, err := New(plan, WithMicrobatches(2), WithSolverFactory(c.factory))
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "the WithSolver factory must build a new solver (and new decorators) for every stage")
			require.Nil(t, vm)
		})
	}
	vm, err := New(plan, WithMicrobatches(2), WithSolverFactory(func(int) (gorgonia.Solver, error) {
		return solvers.NewMomentum(solvers.WithLearnRate(0.05))
	}))
	require.NoError(t, err)
	require.NoError(t, vm.Close())
}
