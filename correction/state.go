package correction

import (
	"math"

	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// kind is the solvers.State.Kind of a Solver.
const kind = "correction.Solver"

// SaveState returns T2's own state: δ per learnable ("delta/<i>"; none
// before the first Step or Bind), the steps taken ("steps"), the delay
// ("delay") and γ ("gamma"). The wrapped solver saves its own
// (solvers.Save saves every layer). The scratch buffer is not state.
func (s *Solver) SaveState() (solvers.State, error) {
	st := solvers.State{
		Kind:    s.kind,
		Tensors: map[string]tensor.Tensor{},
		Ints:    map[string]int64{"steps": int64(s.steps)},
		Floats:  map[string]float64{"delay": s.tau, "gamma": s.gamma},
	}
	return st, s.delta.Save(st.Tensors)
}

// CheckState returns the error LoadState would return for st.
func (s *Solver) CheckState(st solvers.State) error {
	if err := st.Check(s.kind, []string{"steps"}, []string{"delay", "gamma"}); err != nil {
		return err
	}
	steps, tau, gamma := st.Ints["steps"], st.Floats["delay"], st.Floats["gamma"]
	want := s.gamma
	if s.d > 0 {
		want = math.Pow(s.d, 1/max(tau, 1))
	}
	switch {
	case tau < 1:
		return errors.Errorf("correction: the state's delay %g is below 1", tau)
	case gamma != want:
		return errors.Errorf("correction: the state's γ is %g, this Solver's %g (another WithGamma or WithGammaFromD)", gamma, want)
	}
	if _, err := s.delta.Check(st.Tensors, steps > 0); err != nil {
		return errors.Wrap(err, "correction: state")
	}
	return nil
}

// LoadState restores T2's own state, saved by a Solver of the same
// configuration (the same γ, or γ = D^(1/τ) with the same D) over the same
// learnables, none at all included. It changes nothing when it fails. A
// Solver that has not been bound needs Bind before its first
// BackwardWeights.
func (s *Solver) LoadState(st solvers.State) error {
	if err := s.CheckState(st); err != nil {
		return err
	}
	steps := st.Ints["steps"]
	if _, err := s.delta.Load(st.Tensors, steps > 0); err != nil {
		return errors.Wrap(err, "correction: state") // unreachable: checked
	}
	s.steps, s.tau, s.gamma = int(steps), st.Floats["delay"], st.Floats["gamma"]
	s.held = shift{}
	return nil
}
