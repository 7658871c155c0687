package solvers

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// State is what one solver, or one decorator in a chain of solvers, needs
// to resume exactly where it stopped: its own tensors (a velocity, Adam's
// moments, T2's δ) and numbers (step counts, the delay in use). A decorator
// saves only its own fields, never those of the solver it wraps: Chain
// lists every layer, and a caller saves each layer's State.
//
// Tensors returned by SaveState are copies the caller owns. LoadState reads
// the tensors it is given and copies them; the caller may reuse them.
type State struct {
	// Tensors are keyed by a name that is stable across runs, such as
	// "velocity/3" for the velocity of the fourth learnable.
	Tensors map[string]tensor.Tensor
	// Ints are counters (steps taken, steps in a phase).
	Ints map[string]int64
	// Floats are real numbers (a delay, a learning rate in use).
	Floats map[string]float64
}

// Stateful is implemented by solvers and solver decorators whose state can
// be saved and restored. SaveState and LoadState are called between steps,
// from the goroutine that steps the solver. LoadState of a State saved by
// a solver of another kind or configuration (different learnables, shapes
// or dtypes) returns an error naming what differs; it never loads part of
// a State.
type Stateful interface {
	SaveState() (State, error)
	LoadState(State) error
}

// Decorator is implemented by a solver that wraps another one (T1's
// rescheduler, T2's correction). Inner returns the wrapped solver.
type Decorator interface {
	Inner() gorgonia.Solver
}

// Chain returns s followed by every solver it wraps, outermost first: the
// one way a pipeline engine discovers what a stage's solver can do (tell
// it the delay, supply backward weights, save its state).
func Chain(s gorgonia.Solver) []gorgonia.Solver {
	var out []gorgonia.Solver
	for s != nil {
		out = append(out, s)
		d, ok := s.(Decorator)
		if !ok {
			break
		}
		s = d.Inner()
	}
	return out
}
