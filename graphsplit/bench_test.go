package graphsplit

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// deepMLP builds a layers-deep MLP (matmul, broadcast bias, tanh per layer)
// at batch 32 and width 64.
func deepMLP(tb testing.TB, layers int) (*G.ExprGraph, *G.Node, G.Nodes) {
	g := G.NewGraph()
	const batch, width = 32, 64
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, width), G.WithName("x"))
	var learn G.Nodes
	h := x
	for l := 0; l < layers; l++ {
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(width, width), G.WithName(fmt.Sprintf("w%d", l)), G.WithInit(G.GlorotU(1)))
		b := G.NewMatrix(g, tensor.Float32, G.WithShape(1, width), G.WithName(fmt.Sprintf("b%d", l)), G.WithInit(G.Zeroes()))
		learn = append(learn, w, b)
		var err error
		if h, err = G.Mul(h, w); err != nil {
			tb.Fatal(err)
		}
		if h, err = G.BroadcastAdd(h, b, nil, []byte{0}); err != nil {
			tb.Fatal(err)
		}
		if h, err = G.Tanh(h); err != nil {
			tb.Fatal(err)
		}
	}
	cost, err := G.Mean(h)
	if err != nil {
		tb.Fatal(err)
	}
	return g, cost, learn
}

// BenchmarkSplitDeepFineGrained splits a 100-layer MLP into its 100
// fine-grained stages, building every stage's forward and train programs.
func BenchmarkSplitDeepFineGrained(b *testing.B) {
	g, cost, learn := deepMLP(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		plan, err := Split(g, cost, learn, FineGrained())
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Stages) != 100 {
			b.Fatalf("%d stages", len(plan.Stages))
		}
	}
}

// BenchmarkSplitDeepBalanced balances the same graph into 8 stages.
func BenchmarkSplitDeepBalanced(b *testing.B) {
	g, cost, learn := deepMLP(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Split(g, cost, learn, Stages(8)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunTrain runs the one-stage Train program of a 4-layer MLP
// (forward and backward) with guarded ops and with the user's ops as they
// are: the cost of the guards.
func BenchmarkRunTrain(b *testing.B) {
	g, cost, learn := deepMLP(b, 4)
	var x *G.Node
	for _, n := range g.AllNodes() {
		if n.Name() == "x" {
			x = n
		}
	}
	xv := tensor.New(tensor.WithShape(x.Shape()...), tensor.Of(tensor.Float32))
	for _, c := range []struct {
		name string
		opts []Option
	}{{"guarded", nil}, {"unguarded", []Option{unguarded()}}} {
		b.Run(c.name, func(b *testing.B) {
			plan, err := Split(g, cost, learn, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer plan.Close()
			one, err := scalarOne(tensor.Float32)
			if err != nil {
				b.Fatal(err)
			}
			train := plan.Stages[0].Train
			b.ReportAllocs()
			for b.Loop() {
				if _, err := train.Run([]G.Value{xv}, []G.Value{one}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
