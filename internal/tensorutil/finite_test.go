package tensorutil

import (
	"math"
	"math/rand"
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

// TestAddIntoIsGosAddition: adding float32 tensors gives, bit for bit,
// Go's d[i] + x[i] at every length around the vector loop's 8 lanes, with
// zeros of both signs, subnormals, sums that overflow, infinities and a NaN
// in one operand.
func TestAddIntoIsGosAddition(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	specials := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -1e-40, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	draw := func() float32 {
		if rng.Intn(3) == 0 {
			return specials[rng.Intn(len(specials))]
		}
		return float32(rng.NormFloat64())
	}
	for n := 1; n <= 40; n++ {
		d, x := make([]float32, n), make([]float32, n)
		want := make([]uint32, n)
		for i := range d {
			d[i], x[i] = draw(), draw()
			if d[i] != d[i] && x[i] != x[i] { // which NaN survives two is not Go's to say
				x[i] = 1
			}
			want[i] = math.Float32bits(d[i] + x[i])
		}
		dst := tensor.New(tensor.WithBacking(d))
		require.NoError(t, AddInto(dst, tensor.New(tensor.WithBacking(x))))
		for i, v := range dst.Float32s() {
			require.Equal(t, want[i], math.Float32bits(v), "element %d of %d: %v + %v", i, n, d[i], x[i])
		}
	}
}

// BenchmarkAddInto adds a gradient of the zoo MLP's 235,146 float32
// learnables into its accumulator, as a stage does after every backward.
func BenchmarkAddInto(b *testing.B) {
	acc := tensor.New(tensor.WithBacking(make([]float32, 235146)))
	g := tensor.New(tensor.WithBacking(make([]float32, 235146)))
	for b.Loop() {
		if err := AddInto(acc, g); err != nil {
			b.Fatal(err)
		}
	}
}
