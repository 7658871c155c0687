package bnstate

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func batchNorm(t *testing.T) *gorgonia.BatchNormOp {
	g := gorgonia.NewGraph()
	x := gorgonia.NewTensor(g, tensor.Float64, 4, gorgonia.WithShape(2, 3, 1, 1), gorgonia.WithName("x"))
	_, _, _, op, err := gorgonia.BatchNorm(x, nil, nil, 0.1, 1e-5)
	require.NoError(t, err)
	mean, vari := op.Stats()
	copy(mean.Data().([]float64), []float64{1, 2, 3})
	copy(vari.Data().([]float64), []float64{4, 5, 6})
	return op
}

// TestInferKeepsTheStatistics: gorgonia's SetTraining(true) zeroes the
// running statistics; Infer's undo puts the op back in training mode with
// the statistics it had.
func TestInferKeepsTheStatistics(t *testing.T) {
	op := batchNorm(t)
	undo, err := Infer([]*gorgonia.BatchNormOp{op})
	require.NoError(t, err)
	undo()
	mean, vari := op.Stats()
	require.Equal(t, []float64{1, 2, 3}, mean.Data())
	require.Equal(t, []float64{4, 5, 6}, vari.Data())

	require.NoError(t, op.SetTraining(true))
	mean, _ = op.Stats()
	require.Equal(t, []float64{0, 0, 0}, mean.Data(), "the trap this package exists for")
}

func TestSaveRestore(t *testing.T) {
	op := batchNorm(t)
	saved := Save([]*gorgonia.BatchNormOp{op})
	require.Len(t, saved.Tensors(), 2)
	mean, _ := op.Stats()
	mean.Data().([]float64)[0] = 99
	saved.Restore()
	mean, _ = op.Stats()
	require.Equal(t, 1.0, mean.Data().([]float64)[0])
}
