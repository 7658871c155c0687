package update

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// specials are the values where a vector loop could part from the scalar
// one: zeros of both signs, subnormals, the extremes, infinities, NaNs of
// both signs with payloads, quiet and signalling.
var specials = []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	1e-40, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.Float32frombits(0xffc00123), math.Float32frombits(0x7fa00000), 1, -1}

// values returns n floats over many magnitudes, one in five a special.
func values(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.Intn(5) == 0 {
			x[i] = specials[r.Intn(len(specials))]
			continue
		}
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.Intn(20)-10)))
	}
	return x
}

// scalar runs f with the vector loops off.
func scalar(f func()) {
	defer func(w bool) { wide = w }(wide)
	wide = false
	f()
}

// requireSameBits fails unless got has want's bits, a NaN where want has
// one (which NaN x86 returns, when both operands are NaNs, depends on their
// order, and that of the scalar loop is the compiler's choice).
func requireSameBits(t *testing.T, want, got []float32, what string) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
			t.Fatalf("%s: element %d of %d: the scalar loop gives %v (%#x), the vector loop %v (%#x)", what, i, len(want), want[i], math.Float32bits(want[i]), got[i], math.Float32bits(got[i]))
		}
	}
}

// TestVectorLoopsGiveTheScalarBits runs each loop with and without its
// vector kernel over lengths around multiples of 8 and compares every bit.
func TestVectorLoopsGiveTheScalarBits(t *testing.T) {
	if !wide {
		t.Skip("no AVX on this CPU: only the scalar loops run")
	}
	r := rand.New(rand.NewSource(1))
	for n := 0; n <= 70; n++ {
		for rep := 0; rep < 20; rep++ {
			w, g, v, d := values(r, n), values(r, n), values(r, n), values(r, n)
			beta, eta, gamma, k := values(r, 1)[0], values(r, 1)[0], values(r, 1)[0], values(r, 1)[0]

			sw, sv := clone(w), clone(v)
			scalar(func() { Momentum(sw, g, sv, beta, eta) })
			vw, vv := clone(w), clone(v)
			Momentum(vw, g, vv, beta, eta)
			requireSameBits(t, sw, vw, "Momentum's weights")
			requireSameBits(t, sv, vv, "Momentum's velocity")

			sd := clone(d)
			scalar(func() { Velocity(sd, w, v, gamma) })
			vd := clone(d)
			Velocity(vd, w, v, gamma)
			requireSameBits(t, sd, vd, "Velocity")

			ss, vs := make([]float32, n), make([]float32, n)
			scalar(func() { Shift(ss, w, d, k) })
			Shift(vs, w, d, k)
			requireSameBits(t, ss, vs, "Shift")
		}
	}
}

// TestLoopsComputeTheirFormulas checks each loop against its formula on
// exact values, so both loops agreeing on a wrong formula fails it.
func TestLoopsComputeTheirFormulas(t *testing.T) {
	n := 19 // two vector blocks and a scalar tail
	w, g, v, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], g[i], v[i], d[i] = float32(i), float32(2*i), float32(-i), float32(i%4)
	}
	old := clone(w)
	Momentum(w, g, v, 0.5, -0.25)
	for i := range w {
		c := -0.5*float32(i) - 0.25*float32(2*i)
		require.Equal(t, c, v[i], "velocity %d", i)
		require.Equal(t, float32(i)+c, w[i], "weight %d", i)
	}
	dd := clone(d)
	Velocity(dd, w, old, 0.75)
	for i := range dd {
		require.Equal(t, 0.75*d[i]+0.25*(w[i]-old[i]), dd[i], "δ %d", i)
	}
	dst := make([]float32, n)
	Shift(dst, w, d, 2)
	for i := range dst {
		require.Equal(t, w[i]-2*d[i], dst[i], "shift %d", i)
	}
}

// FuzzShift compares Shift's loops on any bytes taken as float32s.
func FuzzShift(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x7f, 1, 0, 0, 0}, float32(1))
	f.Fuzz(func(t *testing.T, raw []byte, k float32) {
		if !wide {
			t.Skip("no AVX")
		}
		n := len(raw) / 8
		w, d := make([]float32, n), make([]float32, n)
		for i := 0; i < n; i++ {
			w[i] = math.Float32frombits(uint32(raw[8*i]) | uint32(raw[8*i+1])<<8 | uint32(raw[8*i+2])<<16 | uint32(raw[8*i+3])<<24)
			d[i] = math.Float32frombits(uint32(raw[8*i+4]) | uint32(raw[8*i+5])<<8 | uint32(raw[8*i+6])<<16 | uint32(raw[8*i+7])<<24)
		}
		s, v := make([]float32, n), make([]float32, n)
		scalar(func() { Shift(s, w, d, k) })
		Shift(v, w, d, k)
		requireSameBits(t, s, v, "Shift")
	})
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }
