package stageops

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBNReLUWideIsScalar: the vector kernels give the scalar loops' bits,
// forward's, upstream's and the terms of the scale's and bias's sums, for every length to 40 and inputs, gradients
// and constants that include NaNs of several payloads, infinities, ±0,
// subnormals and values whose t lands on either side of 0.
func TestBNReLUWideIsScalar(t *testing.T) {
	if !wideBN {
		t.Skip("no AVX: forward computes every element in Go")
	}
	defer func() { wideBN = true }()
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
			x, dy := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], dy[i] = draw(special || round == 0), draw(special)
			}
			for _, timesXhat := range []bool{false, true} { // the scale's and bias's terms
				want := make([]float32, n)
				for i := range want {
					want[i] = ch.elem(x[i], dy[i], timesXhat)
				}
				got := ch.terms(make([]float32, n), x, dy, timesXhat)
				if n < 8 {
					require.Nil(t, got)
					continue
				}
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "round %d, terms timesXhat %v, n %d, element %d: x %v, dy %v, channel %+v", round, timesXhat, n, i, x[i], dy[i], ch)
				}
			}
			for _, up := range []bool{false, true} {
				want, got := make([]float32, n), make([]float32, n)
				for _, wide := range []bool{false, true} {
					out := want
					if wideBN = wide; wide {
						out = got
					}
					if up {
						ch.upstream(out, x, dy)
					} else {
						ch.forward(out, x)
					}
				}
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "round %d, upstream %v, n %d, element %d: x %v, dy %v, channel %+v", round, up, n, i, x[i], dy[i], ch)
				}
			}
		}
	}
}
