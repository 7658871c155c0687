package tensorutil

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestAddCopyAcrossShapes(t *testing.T) {
	dst := tensor.New(tensor.WithShape(2, 3, 1), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	src := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{10, 20, 30, 40, 50, 60}))
	require.NoError(t, AddInto(dst, src))
	require.Equal(t, []float64{11, 22, 33, 44, 55, 66}, dst.Data())
	require.NoError(t, CopyInto(dst, src))
	require.Equal(t, src.Data(), dst.Data())
	require.Error(t, AddInto(dst, tensor.New(tensor.WithShape(5), tensor.Of(tensor.Float64))))
	require.Error(t, AddInto(dst, tensor.New(tensor.WithShape(6), tensor.Of(tensor.Float32))))
}

func TestFiniteAndScalar(t *testing.T) {
	require.True(t, Finite(tensor.New(tensor.WithBacking([]float32{1, 2}))))
	require.False(t, Finite(tensor.New(tensor.WithBacking([]float32{1, float32(math.Inf(1))}))))
	require.False(t, Finite(gorgonia.NewF64(math.NaN())))
	x, err := Scalar(gorgonia.NewF32(2.5))
	require.NoError(t, err)
	require.Equal(t, 2.5, x)
	_, err = Scalar(tensor.New(tensor.WithBacking([]float64{1, 2})))
	require.Error(t, err)
}

func TestRows(t *testing.T) {
	m := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7}))
	r, err := Rows(m, 1, 2)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 2}, r.Shape())
	require.Equal(t, []float32{2, 3, 4, 5}, r.Data())
	r.Data().([]float32)[0] = 99
	require.Equal(t, float32(2), m.Data().([]float32)[2], "Rows copies")
	_, err = Rows(m, 3, 2)
	require.Error(t, err)
	require.Error(t, RowsInto(Zeros(tensor.Float32, tensor.Shape{2, 3}), m, 0), "rows of another width")
	require.Error(t, RowsInto(Zeros(tensor.Float64, tensor.Shape{2, 2}), m, 0), "rows of another dtype")
	into := Zeros(tensor.Float32, tensor.Shape{1, 2})
	require.NoError(t, RowsInto(into, m, 3))
	require.Equal(t, []float32{6, 7}, into.Data())
}

// TestZeroDimensional: a 0-d dense tensor's Data is its element, not a
// slice; copies and sums reach it all the same (a scalar learnable's
// solver buffers are 0-d).
func TestZeroDimensional(t *testing.T) {
	dst := Zeros(tensor.Float32, tensor.ScalarShape())
	require.NoError(t, CopyInto(dst, gorgonia.NewF32(1.5)))
	require.NoError(t, AddInto(dst, tensor.New(tensor.FromScalar(float32(2)))))
	require.Equal(t, float32(3.5), dst.Data())
	c, err := Clone(dst)
	require.NoError(t, err)
	require.Equal(t, tensor.ScalarShape(), c.Shape())
	require.Equal(t, float32(3.5), c.Data())
}
