package solvers_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// valueGrad is a learnable with its gradient, as an engine hands them to a
// solver.
type valueGrad struct{ w, g *tensor.Dense }

func (v valueGrad) Value() gorgonia.Value         { return v.w }
func (v valueGrad) Grad() (gorgonia.Value, error) { return v.g, nil }

// Save a Momentum's state after two steps, load it into a fresh solver,
// and both take the same third step.
func Example() {
	newModel := func() []gorgonia.ValueGrad {
		return []gorgonia.ValueGrad{valueGrad{
			tensor.New(tensor.WithBacking([]float64{1, 2})),
			tensor.New(tensor.WithShape(2), tensor.Of(tensor.Float64)),
		}}
	}
	step := func(s gorgonia.Solver, model []gorgonia.ValueGrad) {
		copy(model[0].(valueGrad).g.Float64s(), []float64{0.5, -1}) // the gradient
		if err := s.Step(model); err != nil {
			log.Fatal(err)
		}
	}
	a, err := solvers.NewMomentum(solvers.WithLearnRate(0.1), solvers.WithMomentum(0.9))
	if err != nil {
		log.Fatal(err)
	}
	model := newModel()
	step(a, model)
	step(a, model)
	saved, err := solvers.Save(a)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s after %d steps: velocity %.3f\n", saved[0].Kind, saved[0].Ints["steps"], saved[0].Tensors["velocity/0"].Data())

	b, err := solvers.NewMomentum(solvers.WithLearnRate(0.1), solvers.WithMomentum(0.9))
	if err != nil {
		log.Fatal(err)
	}
	resumed := newModel()
	copy(resumed[0].(valueGrad).w.Float64s(), model[0].(valueGrad).w.Float64s())
	if err := solvers.Load(b, saved); err != nil {
		log.Fatal(err)
	}
	step(a, model)
	step(b, resumed)
	fmt.Printf("uninterrupted %.4f, resumed %.4f\n", model[0].Value().Data(), resumed[0].Value().Data())
	// Output:
	// solvers.Momentum after 2 steps: velocity [-0.095 0.190]
	// uninterrupted [0.7195 2.5610], resumed [0.7195 2.5610]
}

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
	solver, err := rescheduler.New(nadam, rescheduler.WithBase(rescheduler.Warmup(rescheduler.Cosine(3e-4, 3e-5, steps), 100)), rescheduler.WithPhase(0))
	if err != nil {
		log.Fatal(err)
	}
	w := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{1, -2}))
	g := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.5, 0.5}))
	if err := solver.Step([]gorgonia.ValueGrad{valueGrad{w, g}}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rate %.1e, w = %.8f\n", nadam.LearnRate(), w.Data())
	// Output:
	// rate 3.0e-06, w = [0.99999695 -2.00000296]
}
