package asyncvm

import (
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// NewInjected returns a VM that trains plan with injected delays instead
// of a pipeline's: the Sequential schedule, every forward of microbatch m
// at stage i reading the weights of delays.Delay(i, m) updates ago (kept in
// a ring of past versions), every backward the current weights — or the
// ones a BackwardWeighter solver supplies — exactly as a PipeMare stage
// does. It studies T1 and T2 at any P, with any delay distribution,
// reproducibly; fed the delays a real PipeMare run recorded
// (delay.Recorded of VM.DelayLog), it reproduces that run's weights bit for
// bit. A solver is told the mean delay of its stage before the first step.
//
// It takes the options WithMicrobatches, WithSolver(Factory), WithSeed,
// WithDropoutMask, WithDiscrepancy and WithDelayLog, and refuses
// WithSchedule, WithWarmup and WithActivations, which it cannot honour.
func NewInjected(plan *graphsplit.Plan, delays delay.Source, opts ...Option) (*VM, error) {
	if delays == nil {
		return nil, errors.New("asyncvm: NewInjected: no delays")
	}
	cfg, err := newConfig(plan, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range []string{"WithSchedule", "WithWarmup", "WithActivations"} {
		if cfg.set[o] {
			return nil, errors.Errorf("asyncvm: NewInjected cannot honour %s: delay injection runs the sequential schedule with recomputed activations, and delays from the start", o)
		}
	}
	for i := range plan.Stages {
		if delays.Max(i) < 0 {
			return nil, errors.Errorf("asyncvm: NewInjected: stage %d: negative maximum delay", i)
		}
	}
	cfg.sched, cfg.delays = schedule.Sequential(), delays
	cfg.announce = func(i int, _ schedule.Schedule) float64 { return delays.Mean(i) }
	return start(plan, cfg)
}
