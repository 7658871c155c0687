package asyncvm_test

import (
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestSharedLearnablesAreRefusedForNow: until the engine sums a shared
// learnable's contributions across its readers, New and NewInjected refuse
// plans whose stages share one, naming it, instead of letting each stage
// update it with its own part of the gradient. One stage still trains.
func TestSharedLearnablesAreRefusedForNow(t *testing.T) {
	for _, nb := range testmodels.SharedWeights() {
		m, err := nb.Build(tensor.Float64, 2, 1)
		require.NoError(t, err)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(3))
		require.NoError(t, err)
		require.NotEmpty(t, plan.Shared)
		name := plan.Shared[0].Node.Name()
		_, err = asyncvm.New(plan)
		require.ErrorContains(t, err, `learnable "`+name+`" is read by stages`)
		_, err = asyncvm.NewInjected(plan, delay.PipeMare(3, 1))
		require.ErrorContains(t, err, `learnable "`+name+`" is read by stages`)
		require.NoError(t, plan.Close())

		one, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
		require.NoError(t, err)
		vm, err := asyncvm.New(one)
		require.NoError(t, err)
		require.NoError(t, vm.Close())
		require.NoError(t, one.Close())
	}
}
