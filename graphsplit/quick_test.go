package graphsplit

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestQuick(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 2), G.WithName("y"))
	w1 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 5), G.WithName("w1"), G.WithInit(G.GlorotU(1)))
	b1 := G.NewMatrix(g, tensor.Float64, G.WithShape(1, 5), G.WithName("b1"), G.WithInit(G.Zeroes()))
	w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 2), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
	o := G.Must(G.Mul(h, w2))
	sm := G.Must(G.LogSoftMax(o))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(sm, y))))))
	for _, opt := range [][]Option{nil, {FineGrained()}, {Stages(2)}, {Stages(4)}} {
		plan, err := Split(g, cost, G.Nodes{w1, b1, w2}, opt...)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(len(plan.Stages))
		for _, s := range plan.Stages {
			fmt.Println(" stage", s.Index, len(s.Nodes), "in", len(s.Inputs), "out", len(s.Outputs), "learn", len(s.Learnables))
		}
		xv := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}))
		yv := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{1, 0, 0, 1, 1, 0, 0, 1}))
		c, grads, err := stagewise(plan, map[*G.Node]G.Value{x: xv, y: yv})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(c, grads[0])
	}
}
