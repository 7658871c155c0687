package rescheduler

import (
	"github.com/pipemare/pipemare/correction"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// PipeMare composes a stage's solver with both of PipeMare's techniques:
// T2's discrepancy correction with γ = gamma around inner (none when gamma
// is 0), inside T1's rescheduling over phase steps with the base schedule
// base (T1 off when phase is 0: the rate follows base alone). It returns
// the first error a part gives, naming it.
func PipeMare(inner gorgonia.Solver, base Schedule, phase int, gamma float64) (*Solver, error) {
	s := inner
	if gamma != 0 {
		t2, err := correction.New(inner, correction.WithGamma(gamma))
		if err != nil {
			return nil, errors.Wrap(err, "rescheduler: PipeMare: T2")
		}
		s = t2
	}
	opts := []Option{WithPhase(phase)}
	if base != nil {
		opts = append(opts, WithBase(base))
	}
	t1, err := New(s, opts...)
	if err != nil {
		return nil, errors.Wrap(err, "rescheduler: PipeMare: T1")
	}
	return t1, nil
}
