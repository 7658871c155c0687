package solvers_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The AsyncPP optimizer of a stage: NAdam at its defaults (β1 = 0.99,
// decoupled weight decay 0.01, clipping at 10) under a linear warm-up then
// a cosine to 0.1·η, set through the rescheduler. One step on w = (1, −2)
// with gradient (0.5, 0.5).
func ExampleNewNAdam() {
	nadam, err := solvers.NewNAdam()
	if err != nil {
		log.Fatal(err)
	}
	const steps = 1000
	solver, err := rescheduler.New(nadam, rescheduler.WithBase(rescheduler.Warmup(rescheduler.Cosine(3e-4, 3e-5, steps), 100)))
	if err != nil {
		log.Fatal(err)
	}
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, -2}))
	g := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.5, 0.5}))
	if err := solver.Step([]gorgonia.ValueGrad{vg{w, g}}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rate %.1e, w = %.8f\n", nadam.LearnRate(), w.Data())
	// Output:
	// rate 3.0e-06, w = [0.99999695 -2.00000296]
}
