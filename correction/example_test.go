package correction_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
	"gorgonia.org/gorgonia"
)

// Compose PipeMare's two techniques around a stage's solver: T1 outside
// (it sets the learning rate of the innermost solver), T2 inside (it
// watches the steps and supplies the backward weights). newSolver is the
// factory asyncvm.WithSolverFactory calls once per stage: every stage
// gets a chain of its own. At its core solvers.NewMomentum, gorgonia's
// Momentum bit for bit, whose state a checkpoint saves (gorgonia's own
// solvers hide theirs). The engine reaches every layer through
// solvers.Chain, as solvers.SetDelay does here.
func Example() {
	newSolver := func(stage int) (gorgonia.Solver, error) { // a new chain per stage
		momentum, err := solvers.NewMomentum(solvers.WithLearnRate(0.05))
		if err != nil {
			return nil, err
		}
		t2, err := correction.New(momentum, correction.WithGammaFromD(0.1))
		if err != nil {
			return nil, err
		}
		return rescheduler.New(t2, rescheduler.WithPhase(500))
	}
	solver, err := newSolver(0)
	if err != nil {
		log.Fatal(err)
	}
	solvers.SetDelay(solver, 4, false) // what the engine does for a stage with τ = 4
	t1, t2 := solver.(*rescheduler.Solver), solvers.Chain(solver)[1].(*correction.Solver)
	fmt.Printf("τ=%g, γ=%.3f, base rate %.2f\n", t1.Delay(), t2.Gamma(), rescheduler.Constant(0.05).Rate(0))
	fmt.Println("checkpointable:", solvers.Saveable(solver) == nil)
	// Output:
	// τ=4, γ=0.562, base rate 0.05
	// checkpointable: true
}

// Spike compensation and weight prediction around a stage's momentum,
// under T1: the engine announces the delay once to every layer (through
// solvers.Chain), and the forward asks for the predicted weights.
func ExampleNewPredictor() {
	momentum := gorgonia.NewMomentum(gorgonia.WithLearnRate(0.05), gorgonia.WithMomentum(0.9))
	sc, err := correction.NewSpike(momentum)
	if err != nil {
		log.Fatal(err)
	}
	lwp, err := correction.NewPredictor(sc)
	if err != nil {
		log.Fatal(err)
	}
	solver, err := rescheduler.New(lwp, rescheduler.WithPhase(500))
	if err != nil {
		log.Fatal(err)
	}
	solvers.SetDelay(solver, 3, false) // what the engine does for a stage with τ = 3
	a, b := sc.Coefficients()
	fw, err := solvers.ForwardWeights(solver, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("D=%g: a=%.3f b=%.3f; forward weights before the first step: %v\n", sc.Delay(), a, b, fw)
	// Output:
	// D=3: a=0.729 b=2.710; forward weights before the first step: []
}
