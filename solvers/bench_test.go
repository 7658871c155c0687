package solvers_test

import (
	"flag"
	"math/rand"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var impl = flag.String("impl", "ours", "BenchmarkStep's solvers: ours or gorgonia")

type benchVG struct{ w, g *tensor.Dense }

func (v benchVG) Value() gorgonia.Value         { return v.w }
func (v benchVG) Grad() (gorgonia.Value, error) { return v.g, nil }

// BenchmarkStep times one Step over the zoo MLP's learnables (235,146
// float32), gradients refilled before each: compare -impl=gorgonia with
// -impl=ours.
func BenchmarkStep(b *testing.B) {
	shapes := [][]int{{784, 256}, {1, 256}, {256, 128}, {1, 128}, {128, 10}, {1, 10}}
	rng := rand.New(rand.NewSource(1))
	var model []gorgonia.ValueGrad
	var grads [][]float32
	for _, sh := range shapes {
		n := tensor.Shape(sh).TotalSize()
		w, g := make([]float32, n), make([]float32, n)
		for i := range w {
			w[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e-3)
		}
		grads = append(grads, g)
		model = append(model, benchVG{tensor.New(tensor.WithShape(sh...), tensor.WithBacking(w)), tensor.New(tensor.WithShape(sh...), tensor.Of(tensor.Float32))})
	}
	for _, p := range pairs() {
		if p.name != "SGD(0.05)" && p.name != "Momentum(0.03, 0.9)" && p.name != "Adam" {
			continue
		}
		b.Run(p.name, func(b *testing.B) {
			s := p.ours()
			if *impl == "gorgonia" {
				s = p.theirs()
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, vg := range model {
					copy(vg.(benchVG).g.Float32s(), grads[i])
				}
				if err := s.Step(model); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
