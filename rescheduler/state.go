package rescheduler

import (
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
)

// kind is the solvers.State.Kind of a Solver.
const kind = "rescheduler.Solver"

// SaveState returns T1's own state: the steps taken ("steps"), those taken
// with a delay above 1 ("phase_steps"), the delay in use ("delay") and the
// last step's rate ("rate"). The wrapped solver saves its own
// (solvers.Save saves every layer).
func (r *Solver) SaveState() (solvers.State, error) {
	return solvers.State{
		Kind:   kind,
		Ints:   map[string]int64{"steps": int64(r.k), "phase_steps": int64(r.kPhase)},
		Floats: map[string]float64{"delay": r.tau, "rate": r.rate},
	}, nil
}

// CheckState returns the error LoadState would return for st.
func (r *Solver) CheckState(st solvers.State) error {
	if err := st.Check(kind, []string{"steps", "phase_steps"}, []string{"delay", "rate"}); err != nil {
		return err
	}
	if len(st.Tensors) > 0 {
		return errors.Errorf("rescheduler: the state has %d tensors; T1 keeps none", len(st.Tensors))
	}
	steps, phase, tau := st.Ints["steps"], st.Ints["phase_steps"], st.Floats["delay"]
	switch {
	case phase > steps:
		return errors.Errorf("rescheduler: the state has %d phase steps out of %d steps", phase, steps)
	case tau < 1:
		return errors.Errorf("rescheduler: the state's delay %g is below 1", tau)
	case r.fixedTau && tau != r.tau:
		return errors.Errorf("rescheduler: the state's delay is %g, this Solver's WithDelay(%g)", tau, r.tau)
	}
	return nil
}

// LoadState restores T1's own state, saved by a Solver of the same
// configuration; the next Step uses the rate an uninterrupted Solver
// would have. It changes nothing when it fails.
func (r *Solver) LoadState(st solvers.State) error {
	if err := r.CheckState(st); err != nil {
		return err
	}
	steps, phase, tau := st.Ints["steps"], st.Ints["phase_steps"], st.Floats["delay"]
	r.k, r.kPhase, r.tau, r.rate = int(steps), int(phase), tau, st.Floats["rate"]
	return nil
}
