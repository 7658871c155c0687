package stageops

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
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
	draw := drawer(4, 4)
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

// TestGradSumsWideIsScalar: the gradient of x's two sums of 8 channels
// side by side (gradSumsWide, then the elements past a multiple of 8) are
// gradXSums's, channel by channel, bit for bit: over 1 to 3 images, planes
// of 8 to 40 elements, with NaNs of several payloads, infinities, −0s and
// subnormals in g, x and the means (which NaN survives a sum or a product
// shows its operands' order).
func TestGradSumsWideIsScalar(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, and the race detector's build of gradXSums adds NaN operands in the other order; go test ./... runs it")
	}
	if !wideBN {
		t.Skip("no AVX: the sums run in Go")
	}
	draw := drawer(6, 6)
	for round := 0; round < 20; round++ {
		special := round%2 == 1
		for _, s := range []int{8, 9, 15, 16, 21, 40} {
			for b := 1; b <= 3; b++ {
				g, x := make([]float32, b*8*s), make([]float32, b*8*s)
				for i := range g {
					g[i], x[i] = draw(special), draw(special)
				}
				var mean [8]float32
				for j := range mean {
					mean[j] = draw(special)
				}
				var want, got [16]float32
				for img := range b {
					at := img * 8 * s
					for j := range 8 {
						from := at + j*s
						gradXSums(g[from:from+s], x[from:from+s], mean[j], &want[j], &want[8+j])
					}
					done := gradSumsWide(g, x, at, s, &mean, &got)
					require.Equal(t, s&^7, done)
					for j := range 8 {
						from := at + j*s
						gradXSums(g[from+done:from+s], x[from+done:from+s], mean[j], &got[j], &got[8+j])
					}
				}
				for j := range want {
					require.Equal(t, math.Float32bits(want[j]), math.Float32bits(got[j]), "round %d, plane %d, %d images, sum %d", round, s, b, j)
				}
			}
		}
	}
}

// TestGradFinishWideIsScalar: the gradient of x in training mode computed
// eight at a time (gradFinishWide) is the scalar formula's, element by
// element, bit for bit, with NaNs of several payloads, infinities, −0s and
// subnormals in g, x and the four constants.
func TestGradFinishWideIsScalar(t *testing.T) {
	if !wideBN {
		t.Skip("no AVX: the gradient runs in Go")
	}
	draw := drawer(7, 5)
	for round := 0; round < 40; round++ {
		special := round%2 == 1
		gradMean, mean, k, invstd := draw(special), draw(special), draw(special), draw(special)
		for n := 8; n <= 40; n++ {
			g, x := make([]float32, n), make([]float32, n)
			for i := range g {
				g[i], x[i] = draw(special), draw(special)
			}
			want := make([]float32, n)
			for i, v := range x {
				want[i] = (g[i] - gradMean - (v-mean)*k) * invstd
			}
			require.Equal(t, n&^7, gradFinishWide(g, x, gradMean, mean, k, invstd))
			for i := range n &^ 7 {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(g[i]), "round %d, n %d, element %d: g−gradMean−(x−mean)·k, ·invstd with %v %v %v %v", round, n, i, gradMean, mean, k, invstd)
			}
		}
	}
}

// drawer returns a source of normal float32s (seeded with seed) that,
// asked for a special, returns one in oneIn of them from NaNs of several
// payloads, infinities, ±0, subnormals and the largest finite values.
func drawer(seed int64, oneIn int) func(special bool) float32 {
	rng := rand.New(rand.NewSource(seed))
	specials := []float32{
		float32(math.NaN()), math.Float32frombits(0x7fc01234), math.Float32frombits(0xffc00abc), math.Float32frombits(0x7f800001),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x80000003), math.MaxFloat32, -math.MaxFloat32,
	}
	return func(special bool) float32 {
		if special && rng.Intn(oneIn) == 0 {
			return specials[rng.Intn(len(specials))]
		}
		return float32(rng.NormFloat64())
	}
}
