package method

import (
	"github.com/pipemare/pipemare/rescheduler"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Method is one way of training a pipeline: its schedule and how each
// stage's solver chain is built. The zero value has no optimizer and no
// rate; the values below set the schedule and the name.
type Method struct {
	// Name names the method ("pipemare", "1f1b", …).
	Name string
	// Schedule is the pipeline schedule the stages run.
	Schedule schedule.Schedule
	// Optimizer builds the innermost solver of every stage.
	Optimizer Optimizer
	// Techniques wrap the optimizer, innermost first.
	Techniques []Technique
	// Rate is the base learning-rate schedule α_k.
	Rate rescheduler.Schedule
	// T1 is PipeMare's rescheduling length K in asynchronous steps (0: the
	// rate follows Rate alone).
	T1 int
}

// Solver builds the solver chain of one stage (its index is not used:
// every stage gets the same chain, built anew): the Optimizer at Rate's
// first rate, each Technique around it, and the rate layer outermost. It
// returns the first error a part gives, naming the part. Its signature is
// asyncvm.WithSolverFactory's.
func (m Method) Solver(stage int) (gorgonia.Solver, error) {
	if m.Optimizer == nil || m.Rate == nil {
		return nil, errors.Errorf("method %s: stage %d: a method needs an Optimizer and a Rate", m.Name, stage)
	}
	s, err := m.Optimizer.New(m.Rate.Rate(0))
	if err != nil {
		return nil, errors.Wrapf(err, "method %s: %s", m.Name, m.Optimizer.Name())
	}
	for _, t := range m.Techniques {
		if s, err = t.Wrap(s); err != nil {
			return nil, errors.Wrapf(err, "method %s: %s", m.Name, t.Name())
		}
	}
	t1, err := rescheduler.New(s, rescheduler.WithBase(m.Rate), rescheduler.WithPhase(m.T1))
	if err != nil {
		return nil, errors.Wrapf(err, "method %s: T1", m.Name)
	}
	return t1, nil
}

// For is the method that runs schedule s, named after it, with no
// optimizer, rate or technique yet.
func For(s schedule.Schedule) Method { return Method{Name: s.Name, Schedule: s} }

// Sequential is the synchronous baseline (schedule.Sequential).
func Sequential() Method { return For(schedule.Sequential()) }

// GPipe is GPipe's synchronous schedule (schedule.GPipe).
func GPipe() Method { return For(schedule.GPipe()) }

// OneFOneB is the synchronous 1F1B schedule with a flush (schedule.OneFOneB).
func OneFOneB() Method { return For(schedule.OneFOneB()) }

// PipeDream is PipeDream's asynchronous schedule with weight stashing
// (schedule.PipeDream).
func PipeDream() Method { return For(schedule.PipeDream()) }

// PipeMare is PipeMare's asynchronous schedule (schedule.PipeMare); its
// techniques are T1 (Method.T1) and T2 (T2 among the Techniques).
func PipeMare() Method { return For(schedule.PipeMare()) }
