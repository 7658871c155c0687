package graphsplit_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/exectest"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestFirstStageComputesNoDataGradient: gorgonia's symbolic backward
// differentiates both operands of the first layer's x·W, so stage 0's
// Train program holds the data's gradient dY·Wᵀ — an A×Bᵀ product of the
// data's shape — which no stage reads. The executor leaves it out (and
// nothing else that a learnable's gradient needs), and every result is
// the tape machine's, bit for bit, run after run.
func TestFirstStageComputesNoDataGradient(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float32, 4, 1)
	require.NoError(t, err)
	pipe := exectest.New(t, m.Graph, m.Cost, m.Learnables, true, 5)
	runBatches(t, pipe, m, 3) // the executor's results are the tape's
	st := pipe.Plan.Stages[0]
	x := m.Inputs[0].Shape() // (4, 16)
	products := func(ops []string) (n int) {
		for _, o := range ops {
			if o == fmt.Sprintf("A × Bᵀ %v", x) {
				n++
			}
		}
		return n
	}
	var run, left []string
	for _, o := range st.Train.Ops() {
		run = append(run, fmt.Sprintf("%v %v", o.Op, o.Node.Shape()))
	}
	for _, o := range st.Train.Pruned() {
		left = append(left, fmt.Sprintf("%v %v", o.Op, o.Node.Shape()))
	}
	require.Equal(t, 0, products(run), "stage 0 runs the data's gradient: %v", run)
	require.Equal(t, 1, products(left), "left out: %v", left)
	for _, o := range st.Train.Pruned() {
		require.False(t, slices.Contains(st.Train.LearnableGrads, o.Node), "a learnable's gradient %s was left out", o.Node.Name())
	}
}
