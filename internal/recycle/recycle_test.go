package recycle

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGetHandsOutWhatWasPut: a tensor Put comes back from a Get of its
// dtype and size, in the shape asked for; views, scalars and other sizes
// are not pooled.
func TestGetHandsOutWhatWasPut(t *testing.T) {
	Debug(true)
	defer Debug(false)
	a := Get(tensor.Float32, tensor.Shape{2, 6})
	require.Equal(t, tensor.Shape{2, 6}, a.Shape())
	Put(a)
	b := Get(tensor.Float32, tensor.Shape{3, 4})
	require.Same(t, a, b, "the pooled tensor, reshaped")
	require.Equal(t, tensor.Shape{3, 4}, b.Shape())
	require.True(t, math.IsNaN(float64(b.Float32s()[0])), "poisoned while pooled")
	c := Get(tensor.Float32, tensor.Shape{12})
	require.NotSame(t, b, c, "b is handed out")

	v, err := b.Slice(gorgonia.S(0))
	require.NoError(t, err)
	Put(v)                  // a view: ignored
	Put(gorgonia.NewF32(1)) // a scalar: ignored
	Put(nil)                // nothing
	d := Get(tensor.Float64, tensor.Shape{12})
	require.NotSame(t, any(c), any(d))
	require.Equal(t, tensor.Float64, d.Dtype())
}

// TestDebugCatchesTwoOwners: under Debug, a second Put of a pooled tensor
// panics, and so does a Get of a tensor written after its Put.
func TestDebugCatchesTwoOwners(t *testing.T) {
	Debug(true)
	defer Debug(false)
	a := Get(tensor.Float64, tensor.Shape{5})
	Put(a)
	require.PanicsWithValue(t, "recycle: a (5) float64 tensor was Put twice", func() { Put(a) })

	Debug(true) // forget a
	b := Get(tensor.Float64, tensor.Shape{7})
	Put(b)
	b.Float64s()[3] = 1 // a use after its Put
	require.PanicsWithValue(t, "recycle: a (7) float64 tensor was written after it was Put", func() { Get(tensor.Float64, tensor.Shape{7}) })
}

// TestCopyIsTheCallers: Copy gives a pooled tensor with v's values, and a
// clone of a scalar.
func TestCopyIsTheCallers(t *testing.T) {
	src := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	c, err := Copy(src)
	require.NoError(t, err)
	require.NotSame(t, any(src), any(c))
	require.Equal(t, src.Data(), c.Data())
	require.Equal(t, src.Shape(), c.Shape())
	s, err := Copy(gorgonia.NewF64(2))
	require.NoError(t, err)
	require.Equal(t, 2.0, s.Data())
	n, err := Copy(nil)
	require.NoError(t, err)
	require.Nil(t, n)
}
