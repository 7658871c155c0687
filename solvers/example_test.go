package solvers_test

import (
	"fmt"
	"log"

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
