package stageops

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBNReLUWideIsForwards: the vector kernel gives the scalar loop's bits
// for every length to 40 and inputs and constants that include NaNs of
// several payloads, infinities, ±0, subnormals and values whose t lands on
// either side of 0.
func TestBNReLUWideIsForwards(t *testing.T) {
	if !wideBN {
		t.Skip("no AVX: forward computes every element in Go")
	}
	rng := rand.New(rand.NewSource(4))
	specials := []float32{
		float32(math.NaN()), math.Float32frombits(0x7fc01234), math.Float32frombits(0xffc00abc), math.Float32frombits(0x7f800001),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x80000003), math.MaxFloat32, -math.MaxFloat32,
	}
	draw := func(special bool) float32 {
		if special && rng.Intn(4) == 0 {
			return specials[rng.Intn(len(specials))]
		}
		return float32(rng.NormFloat64())
	}
	for round := 0; round < 50; round++ {
		special := round%2 == 1
		ch := bnChannel[float32]{alpha: draw(special), beta: draw(special), scale: draw(special), bias: draw(special), affine: true, relu: true}
		if round == 0 { // t exactly ±0 and both signs around it
			ch = bnChannel[float32]{alpha: 1, beta: 0, scale: 1, bias: 0, affine: true, relu: true}
		}
		for n := 0; n <= 40; n++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = draw(special || round == 0)
			}
			want, got := make([]float32, n), make([]float32, n)
			wideBN = false
			ch.forward(want, x)
			wideBN = true
			ch.forward(got, x)
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "round %d, n %d, element %d: x %v, channel %+v", round, n, i, x[i], ch)
			}
		}
	}
}
