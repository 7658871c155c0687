package recycle

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestPutGivesALentTensorBack: the first Put of a lent tensor calls its
// lender back, once, and does not pool it; the next Get of its size hands
// out another.
func TestPutGivesALentTensorBack(t *testing.T) {
	Debug(true)
	defer Debug(false)
	lent := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))
	back := 0
	Lend(lent, func() { back++ })
	Put(lent)
	require.Equal(t, 1, back)
	require.NotSame(t, lent, Get(tensor.Float32, tensor.Shape{2, 3}), "not pooled")
	require.Equal(t, []float32{0, 0, 0, 0, 0, 0}, lent.Float32s(), "not poisoned: its memory is the lender's")
}
