package solvers

import (
	"math"
	"sort"
	"strings"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// State is what one solver, or one decorator in a chain of solvers, needs
// to resume exactly where it stopped: its own tensors (a velocity, Adam's
// moments, T2's δ) and numbers (step counts, the delay in use). A decorator
// saves only its own fields, never those of the solver it wraps: Chain
// lists every layer, and a caller saves each layer's State (Save, Load).
//
// Tensors returned by SaveState are copies the caller owns. LoadState reads
// the tensors it is given and copies them; the caller may reuse them.
type State struct {
	// Kind names the solver that saved the State ("solvers.Momentum",
	// "rescheduler.Solver", …); LoadState refuses another kind's State.
	Kind string
	// Tensors are keyed by a name that is stable across runs, such as
	// "velocity/3" for the velocity of the fourth learnable. A solver that
	// has not yet been bound to its learnables (Binder) saves none.
	Tensors map[string]tensor.Tensor
	// Ints are counters (steps taken, steps in a phase).
	Ints map[string]int64
	// Floats are real numbers (a delay, a learning rate in use).
	Floats map[string]float64
}

// Stateful is implemented by solvers and solver decorators whose state can
// be saved and restored. SaveState, CheckState and LoadState are called
// between steps, from the goroutine that steps the solver. LoadState of a
// State saved by a solver of another kind or configuration (different
// learnables, shapes or dtypes, missing or unknown keys) returns an error
// naming what differs and changes nothing; it never loads part of a State.
// CheckState returns the error LoadState would, and changes nothing: a
// State it accepts, LoadState loads. A solver loaded from the State
// another one saved continues bit-identically to it; every State a solver
// saves, whatever its model (no learnables at all included), loads into a
// solver of the same configuration.
type Stateful interface {
	SaveState() (State, error)
	CheckState(State) error
	LoadState(State) error
}

// Check returns an error unless s is of kind and holds exactly the given
// ints and floats, all ints (counters) non-negative and all floats finite. Tensors are the caller's to check.
// It is what every Stateful's LoadState starts with.
func (s State) Check(kind string, ints, floats []string) error {
	if s.Kind != kind {
		return errors.Errorf("solvers: a %s cannot load the state of a %s", kind, orUnnamed(s.Kind))
	}
	if err := exactKeys(kind, "int", s.Ints, ints); err != nil {
		return err
	}
	if err := exactKeys(kind, "float", s.Floats, floats); err != nil {
		return err
	}
	for name, v := range s.Ints {
		if v < 0 {
			return errors.Errorf("solvers: %s state: int %q is %d", kind, name, v)
		}
	}
	for name, v := range s.Floats {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.Errorf("solvers: %s state: float %q is %g", kind, name, v)
		}
	}
	return nil
}

func exactKeys[V any](kind, what string, got map[string]V, want []string) error {
	for _, k := range want {
		if _, ok := got[k]; !ok {
			return errors.Errorf("solvers: %s state: missing %s %q", kind, what, k)
		}
	}
	var extra []string
	for k := range got {
		found := false
		for _, w := range want {
			found = found || w == k
		}
		if !found {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return errors.Errorf("solvers: %s state: unknown %s %s", kind, what, strings.Join(quote(extra), ", "))
	}
	return nil
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = `"` + s + `"`
	}
	return out
}

func orUnnamed(kind string) string {
	if kind == "" {
		return "solver of no kind"
	}
	return kind
}
