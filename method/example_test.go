package method_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/method"
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/solvers"
)

// PipeMare's stage solver as a value: T1 over 500 steps around T2 (γ =
// 0.9) around Momentum, at a constant base rate.
func ExampleMethod_Solver() {
	m := method.PipeMare()
	m.Optimizer = method.Momentum{Beta: 0.9}
	m.Rate = rescheduler.Constant(0.05)
	m.T1, m.Techniques = 500, []method.Technique{method.T2{Gamma: 0.9}}
	s, err := m.Solver(0) // what asyncvm.WithSolverFactory(m.Solver) calls for stage 0
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Name, m.Schedule.Name)
	for _, layer := range solvers.Chain(s) {
		fmt.Printf("%T\n", layer)
	}
	// Output:
	// pipemare pipemare
	// *rescheduler.Solver
	// *correction.Solver
	// *solvers.Momentum
}
