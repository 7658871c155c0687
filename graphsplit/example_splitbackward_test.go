package graphsplit_test

import (
	"fmt"
	"log"
	"slices"

	"github.com/pipemare/pipemare/graphsplit"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Split the last stage's backward in two, as a zero-bubble schedule runs
// it: Input gives the gradient the previous stage waits for, Weight later
// gives the learnables' gradients from what Input kept — the keeping
// backward's gradients, bit for bit.
func ExamplePlan_NewSplitKeeping() {
	g, _, cost, learnables := mlp()
	plan, err := graphsplit.Split(g, cost, learnables, graphsplit.Stages(2))
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()
	k, sb, err := plan.NewSplitKeeping(1)
	if err != nil {
		log.Fatal(err)
	}
	hs := make([]float64, 8*16) // the stage's input, the first stage's output
	for i := range hs {
		hs[i] = float64(i%7) - 3
	}
	h := tensor.New(tensor.WithShape(8, 16), tensor.WithBacking(hs))
	fwd, err := k.Forward.Run([]G.Value{h}, nil)
	if err != nil {
		log.Fatal(err)
	}
	one := []G.Value{G.NewF64(1)} // the cost's gradient
	whole, err := k.Backward.Run(fwd.Kept, one)
	if err != nil {
		log.Fatal(err)
	}
	whole, _ = whole.Clone()
	in, err := sb.Input.Run(fwd.Kept, one)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Input: gradient of the stage's input %v, keeps %d tensors for Weight\n", in.InputGrads[0].Shape(), len(in.Kept))
	in, _ = in.Clone()
	w, err := sb.Weight.Run(in.Kept, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("input gradient as the whole backward's:", slices.Equal(in.InputGrads[0].Data().([]float64), whole.InputGrads[0].Data().([]float64)))
	fmt.Println("w2's gradient as the whole backward's:", slices.Equal(w.LearnableGrads[0].Data().([]float64), whole.LearnableGrads[0].Data().([]float64)))
	// Output:
	// Input: gradient of the stage's input (8, 16), keeps 2 tensors for Weight
	// input gradient as the whole backward's: true
	// w2's gradient as the whole backward's: true
}
