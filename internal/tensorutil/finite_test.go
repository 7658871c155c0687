package tensorutil

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestFiniteEveryPosition puts each non-finite value at every position of
// even and odd lengths, next to the largest finite values.
func TestFiniteEveryPosition(t *testing.T) {
	for _, n := range []int{1, 2, 5, 7, 8, 9, 16, 23, 40} { // the vector loop's 8 lanes and the rest
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			for at := 0; at < n; at++ {
				d64 := make([]float64, n)
				d32 := make([]float32, n)
				for i := range d64 {
					d64[i], d32[i] = math.MaxFloat64, -math.MaxFloat32
				}
				require.True(t, Finite(tensor.New(tensor.WithBacking(append([]float64(nil), d64...)))))
				require.True(t, Finite(tensor.New(tensor.WithBacking(append([]float32(nil), d32...)))))
				d64[at], d32[at] = bad, float32(bad)
				require.False(t, Finite(tensor.New(tensor.WithBacking(d64))), "%v at %d of %d", bad, at, n)
				require.False(t, Finite(tensor.New(tensor.WithBacking(d32))), "%v at %d of %d", bad, at, n)
			}
		}
	}
}

// BenchmarkFinite checks the zoo MLP's 235,146 float32 learnables, as the
// engine checks a stage's gradients and weights every step.
func BenchmarkFinite(b *testing.B) {
	v := tensor.New(tensor.WithBacking(make([]float32, 235146)))
	for b.Loop() {
		if !Finite(v) {
			b.Fatal("zeros are finite")
		}
	}
}
