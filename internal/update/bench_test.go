package update

import (
	"math/rand"
	"testing"
)

// BenchmarkLoops times each loop over the zoo MLP's first layer (784×256
// float32 weights), with its vector kernel (loop=vector) and without
// (loop=scalar, the loops before this package): compare the two with
// benchstat.
func BenchmarkLoops(b *testing.B) {
	const n = 784 * 256
	r := rand.New(rand.NewSource(1))
	w, g, v, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range w { // finite, as a learnable is
		w[i], g[i], v[i], d[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	dst := make([]float32, n)
	loops := []struct {
		name string
		run  func()
	}{
		{"Momentum", func() { Momentum(w, g, v, 0.9, -1e-9) }},
		{"Velocity", func() { Velocity(d, w, v, 0.9) }},
		{"Shift", func() { Shift(dst, w, d, 1) }},
	}
	for _, l := range loops {
		for _, vector := range []bool{true, false} {
			name := l.name + "/loop=scalar"
			if vector {
				name = l.name + "/loop=vector"
			}
			b.Run(name, func(b *testing.B) {
				if vector && !wide {
					b.Skip("no AVX")
				}
				defer func(was bool) { wide = was }(wide)
				wide = vector
				b.SetBytes(n * 4)
				for b.Loop() {
					l.run()
				}
			})
		}
	}
}
