package graphsplit_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/graphsplit"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// mlp is the model a Gorgonia user already has: built at the microbatch
// size, with a scalar cost and its learnables.
func mlp() (*G.ExprGraph, *G.Node, *G.Node, G.Nodes) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(8, 4), G.WithName("x"))
	w1 := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 16), G.WithName("w1"), G.WithInit(G.GlorotU(1)))
	b1 := G.NewMatrix(g, tensor.Float64, G.WithShape(1, 16), G.WithName("b1"), G.WithInit(G.Zeroes()))
	w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(16, 3), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(h, w2))))))
	return g, x, cost, G.Nodes{w1, b1, w2}
}

// Split a model into one stage per learnable-bearing layer and look at the
// plan.
func ExampleSplit() {
	g, _, cost, learnables := mlp()
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.FineGrained())
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()
	for _, st := range plan.Stages {
		fmt.Printf("stage %d: %d ops, learnables %v, %d params, reads %d, sends %d\n",
			st.Index, len(st.Nodes), st.Learnables, st.NumParams(), len(st.Inputs), len(st.Outputs))
	}
	// Output:
	// stage 0: 6 ops, learnables [w1, b1], 80 params, reads 1, sends 1
	// stage 1: 4 ops, learnables [w2], 48 params, reads 1, sends 1
}

// Run a plan by hand, as a pipeline does: forwards down the stages, then the
// backward of each stage from the last, feeding each stage the gradient its
// successors computed for its outputs.
func ExampleProgram_Run() {
	g, x, cost, learnables := mlp()
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.Stages(2))
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()

	xs := make([]float64, 8*4)
	for i := range xs {
		xs[i] = float64(i%5) - 2
	}
	values := map[int64]G.Value{x.ID(): tensor.New(tensor.WithShape(8, 4), tensor.WithBacking(xs))}
	inputs := func(st *graphsplit.Stage) []G.Value {
		in := make([]G.Value, len(st.Inputs))
		for i, p := range st.Inputs {
			in[i] = values[p.Key]
		}
		return in
	}
	for _, st := range plan.Stages {
		res, err := st.Forward.Run(inputs(st), nil)
		if err != nil {
			log.Fatal(err)
		}
		for i, p := range st.Outputs {
			values[p.Key] = res.Outputs[i]
		}
	}
	fmt.Printf("cost has shape %v\n", values[cost.ID()].Shape())

	grads := map[int64]G.Value{}
	for s := len(plan.Stages) - 1; s >= 0; s-- {
		st := plan.Stages[s]
		outGrads := make([]G.Value, len(st.Outputs))
		for i, p := range st.Outputs {
			if p.Kind == graphsplit.CostPort {
				outGrads[i] = G.NewF64(1)
			} else {
				outGrads[i] = grads[p.Key] // one consumer here; sum them in general
			}
		}
		res, err := st.Train.Run(inputs(st), outGrads)
		if err != nil {
			log.Fatal(err)
		}
		for i, p := range st.Inputs {
			if res.InputGrads[i] != nil {
				grads[p.Key] = res.InputGrads[i]
			}
		}
		for i, l := range st.Learnables {
			fmt.Printf("stage %d: gradient of %s has shape %v\n", s, l.Name(), res.LearnableGrads[i].Shape())
		}
	}
	// Output:
	// cost has shape ()
	// stage 1: gradient of w2 has shape (16, 3)
	// stage 0: gradient of w1 has shape (4, 16)
	// stage 0: gradient of b1 has shape (1, 16)
}

// Split a model whose output projection is its input embedding transposed:
// the first and the last stage share the embedding, and the sum of their
// gradient contributions is its gradient.
func ExampleShared() {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(8, 5), G.WithName("tokens"))
	emb := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 16), G.WithName("embedding"), G.WithInit(G.GlorotU(1)))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(16, 16), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Mul(x, emb)), w))))
	logits := G.Must(G.Mul(h, G.Must(G.Transpose(emb))))
	cost := G.Must(G.Mean(G.Must(G.Square(logits))))

	plan, err := graphsplit.Split(g, cost, G.Nodes{emb, w}, graphsplit.FineGrained())
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()
	for _, sh := range plan.Shared {
		fmt.Printf("%s: owned by stage %d, replicas in stages %v\n", sh.Node.Name(), sh.Owner, sh.Replicas())
	}
	for _, st := range plan.Stages {
		fmt.Printf("stage %d: learnables %v\n", st.Index, st.Learnables)
	}
	// Output:
	// embedding: owned by stage 0, replicas in stages [2]
	// stage 0: learnables [embedding]
	// stage 1: learnables [w]
	// stage 2: learnables [embedding]
}

// Compare two models' weights for bit-identity: the hash covers every
// learnable's raw bytes in plan order.
func ExamplePlan_WeightsSHA256() {
	build := func(w float64) *graphsplit.Plan {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("x"))
		wt := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 1), G.WithName("w"),
			G.WithValue(tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{w, 1}))))
		cost := G.Must(G.Mean(G.Must(G.Mul(x, wt))))
		plan, err := graphsplit.Split(g, cost, G.Nodes{wt}, graphsplit.Stages(1))
		if err != nil {
			log.Fatal(err)
		}
		return plan
	}
	a, b, c := build(0.5), build(0.5), build(0.5000000000000001)
	sum := func(p *graphsplit.Plan) string {
		defer p.Close()
		s, err := p.WeightsSHA256()
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	sa, sb, sc := sum(a), sum(b), sum(c)
	fmt.Println(sa == sb, sa == sc, len(sa))
	// Output:
	// true false 64
}
