package correction

import (
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// saveVelocity returns the velocity estimate's own state: δ as
// "velocity/i", the step count and the delay in use.
func (s *Solver) saveVelocity() (solvers.State, error) {
	st := solvers.State{
		Tensors: map[string]tensor.Tensor{},
		Ints:    map[string]int64{"steps": int64(s.steps)},
		Floats:  map[string]float64{"delay": s.tau},
	}
	st.PutList("velocity", s.delta)
	return st, nil
}

// loadVelocity restores what saveVelocity saved. Before the learnables are
// bound it takes δ's shapes from the State; after, they must match.
func (s *Solver) loadVelocity(st solvers.State) error {
	steps, ok := st.Ints["steps"]
	tau, tok := st.Floats["delay"]
	if !ok || !tok || steps < 0 {
		return errors.New("correction: LoadState: the State has no step count or delay; was it saved by this kind of solver?")
	}
	if err := st.OnlyLists("velocity"); err != nil {
		return errors.Wrap(err, "correction: LoadState")
	}
	delta, err := st.List("velocity", s.delta)
	if err != nil {
		return errors.Wrap(err, "correction: LoadState")
	}
	s.delta, s.steps = delta, int(steps)
	s.setTau(tau)
	return nil
}
