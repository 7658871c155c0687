package solvers

import (
	"fmt"
	"strings"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

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

// Binder is implemented by solvers and decorators that keep tensors per
// learnable (Momentum, Adam, T2). Bind tells them the model they will step
// before their first Step, which would otherwise tell them: it allocates
// their tensors, and a State loaded afterwards is checked against the
// model's shapes and dtypes. T2 needs it after a LoadState before its
// first BackwardWeights. Binding again checks that the model is the same.
// Like Stateful, a Binder binds only itself; Bind binds every layer.
type Binder interface {
	Bind(model []gorgonia.ValueGrad) error
}

// Bind binds every layer of s's Chain that is a Binder to model.
func Bind(s gorgonia.Solver, model []gorgonia.ValueGrad) error {
	for i, l := range Chain(s) {
		if b, ok := l.(Binder); ok {
			if err := b.Bind(model); err != nil {
				return errors.Wrapf(err, "solvers: binding layer %d (%T)", i, l)
			}
		}
	}
	return nil
}

// Saveable returns nil if every layer of s's Chain can save its state
// (Stateful), and else an error naming the first that cannot and what to
// use instead: gorgonia's own solvers hide their state.
func Saveable(s gorgonia.Solver) error {
	layers := Chain(s)
	for i, l := range layers {
		if _, ok := l.(Stateful); !ok {
			return errors.Errorf("solvers: layer %d of %s cannot save its state: gorgonia's solvers keep theirs in unexported fields; use this package's NewSGD, NewMomentum, NewAdam or NewNAdam (solvers.NewMomentum for gorgonia.NewMomentum, bit for bit)", i, describe(layers))
		}
	}
	return nil
}

// Save returns the State of every layer of s's Chain, outermost first. It
// fails if a layer cannot save its state (Saveable), naming it.
func Save(s gorgonia.Solver) ([]State, error) {
	if err := Saveable(s); err != nil {
		return nil, err
	}
	layers := Chain(s)
	out := make([]State, len(layers))
	for i, l := range layers {
		st, err := l.(Stateful).SaveState()
		if err != nil {
			return nil, errors.Wrapf(err, "solvers: saving layer %d (%T)", i, l)
		}
		out[i] = st
	}
	return out, nil
}

// Check returns the error Load would return for states, and changes
// nothing: one State per layer of s's Chain, of the layer's kind, that the
// layer's CheckState accepts. It is how a checkpoint is verified once
// written: the states read back would load.
func Check(s gorgonia.Solver, states []State) error {
	_, err := check(s, states)
	return err
}

// check is Check, also returning the layers' current states.
func check(s gorgonia.Solver, states []State) ([]State, error) {
	layers := Chain(s)
	current, err := Save(s)
	if err != nil {
		return nil, err
	}
	if len(states) != len(layers) {
		return nil, errors.Errorf("solvers: %d states (%s) for a solver of %d layers (%s)", len(states), kinds(states), len(layers), kinds(current))
	}
	for i := range states {
		if states[i].Kind != current[i].Kind {
			return nil, errors.Errorf("solvers: state %d is a %s, layer %d of the solver a %s (states %s, solver %s)", i, orUnnamed(states[i].Kind), i, current[i].Kind, kinds(states), kinds(current))
		}
	}
	for i, l := range layers {
		if err := l.(Stateful).CheckState(states[i]); err != nil {
			return nil, errors.Wrapf(err, "solvers: loading layer %d", i)
		}
	}
	return current, nil
}

// Load loads states, as Save returned them, into the layers of s's Chain.
// It checks them all first (Check) and changes nothing when it fails: a
// layer whose LoadState fails nonetheless leaves the layers loaded before
// it restored to what they were.
func Load(s gorgonia.Solver, states []State) error {
	layers := Chain(s)
	backup, err := check(s, states)
	if err != nil {
		return err
	}
	for i, l := range layers {
		if err := l.(Stateful).LoadState(states[i]); err != nil {
			for j := i - 1; j >= 0; j-- {
				if rerr := layers[j].(Stateful).LoadState(backup[j]); rerr != nil {
					return errors.Wrapf(err, "solvers: loading layer %d (and restoring layer %d failed: %v; discard this solver)", i, j, rerr)
				}
			}
			return errors.Wrapf(err, "solvers: loading layer %d", i)
		}
	}
	return nil
}

func kinds(states []State) string {
	k := make([]string, len(states))
	for i, s := range states {
		k[i] = orUnnamed(s.Kind)
	}
	return strings.Join(k, " > ")
}

func describe(layers []gorgonia.Solver) string {
	k := make([]string, len(layers))
	for i, l := range layers {
		k[i] = fmt.Sprintf("%T", l)
	}
	return strings.Join(k, " > ")
}
