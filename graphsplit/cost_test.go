package graphsplit

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestBackwardFLOPsCountTheGradientsComputed: a product of data and a
// weight costs its forward once more in the backward (the weight's
// gradient; the data's is never computed), a product of an activation and
// a weight twice (both gradients), and Costs adds the backward to the
// forward, so that a placement weighs a first layer for what it trains.
func TestBackwardFLOPsCountTheGradientsComputed(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(8, 4), gorgonia.WithName("x"))
	w1 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("w1"), gorgonia.WithInit(gorgonia.GlorotU(1)))
	w2 := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 2), gorgonia.WithName("w2"), gorgonia.WithInit(gorgonia.GlorotU(1)))
	h := gorgonia.Must(gorgonia.Mul(x, w1))
	y := gorgonia.Must(gorgonia.Mul(h, w2))
	cost := gorgonia.Must(gorgonia.Sum(y))
	plan, err := Split(g, cost, gorgonia.Nodes{w1, w2}, CutAtOps(1))
	require.NoError(t, err)
	defer plan.Close()
	require.Len(t, plan.Stages, 2)
	first, second := plan.Stages[0].Cost, plan.Stages[1].Cost
	require.Equal(t, EstimateFLOPs(h), first.FLOPs)
	require.Equal(t, first.FLOPs, first.BackwardFLOPs, "data × weight: the weight's gradient only")
	require.Equal(t, 2*EstimateFLOPs(y)+EstimateFLOPs(cost), second.BackwardFLOPs, "activation × weight: both gradients; the sum: its input's")
	for s, st := range plan.Stages {
		require.Equal(t, float64(st.Cost.FLOPs+st.Cost.BackwardFLOPs+st.Cost.Bytes), plan.Costs()[s], "stage %d", s)
	}
}
