package graphsplit_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/graphsplit"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// convNet is conv → BatchNorm → ReLU → max-pool → linear, at microbatch 4.
func convNet() (*G.ExprGraph, *G.Node, G.Nodes) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(4, 1, 8, 8), G.WithName("x"), G.WithInit(G.GlorotU(1)))
	w := G.NewTensor(g, tensor.Float64, 4, G.WithShape(4, 1, 3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	scale := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 4, 1, 1), G.WithName("scale"), G.WithInit(G.Ones()))
	bias := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 4, 1, 1), G.WithName("bias"), G.WithInit(G.Zeroes()))
	fc := G.NewMatrix(g, tensor.Float64, G.WithShape(64, 2), G.WithName("fc"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h, _, _, _, err := G.BatchNorm(h, scale, bias, 0.1, 1e-5)
	if err != nil {
		log.Fatal(err)
	}
	h = G.Must(G.MaxPool2D(G.Must(G.Rectify(h)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Reshape(h, tensor.Shape{4, 64}))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(h, fc))))))
	return g, cost, G.Nodes{w, scale, bias, fc}
}

// BatchNorm and MaxPool keep state in their op objects between the forward
// and the backward, so with the user's ops a stage holding them can only
// recompute its forward inside its backward. The stages' own ops keep no
// state: every stage can keep what its backward reads instead (NewKeeping).
func ExamplePlan_CanKeep() {
	for _, opts := range [][]graphsplit.Option{
		{graphsplit.FineGrained()},
		{graphsplit.FineGrained(), graphsplit.WithoutOpSubstitution()},
	} {
		g, cost, learnables := convNet()
		plan, err := graphsplit.Split(g, cost, learnables, opts...)
		if err != nil {
			log.Fatal(err)
		}
		for s := range plan.Stages {
			_, err := plan.NewKeeping(s)
			fmt.Printf("stage %d: stateful ops %d, CanKeep %v, NewKeeping error %v\n", s, len(plan.Stages[s].Stateful), plan.CanKeep(s), err != nil)
		}
	}
	// Output:
	// stage 0: stateful ops 2, CanKeep true, NewKeeping error false
	// stage 1: stateful ops 0, CanKeep true, NewKeeping error false
	// stage 0: stateful ops 2, CanKeep false, NewKeeping error true
	// stage 1: stateful ops 0, CanKeep true, NewKeeping error false
}
