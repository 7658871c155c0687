package footprint

import (
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// Cost is a schedule's cost on a plan: how busy one device per worker
// keeps, and the memory all stages need, activations included.
type Cost struct {
	Schedule string
	// Workers is the number of devices: P/v for v stages per worker.
	Workers int
	// Utilization is 1 − the replayed bubble fraction (schedule.Measured:
	// equal F, I and W times).
	Utilization float64
	// Weights is the weights, the solver's state and what the schedule adds
	// (PipeDream's stash, PipeMare's T2 δ) over all stages, as in Table.
	Weights int64
	// Activations is the sum over stages of each stage's peak inputs kept
	// between a forward and its backward (or W): the microbatches it holds
	// at most in its action list × the bytes of its inputs for one
	// microbatch (a recomputing pipeline keeps its stages' inputs).
	Activations int64
}

// Total is Weights plus Activations.
func (c Cost) Total() int64 { return c.Weights + c.Activations }

// ScheduleCost is s's Cost on plan with n microbatches a step over steps
// steps and a solver with solverSlots weight-sized tensors per learnable:
// PipeMare (s.Async without stashing) with T2's δ, PipeDream with its
// stash, the synchronous schedules with neither.
func ScheduleCost(plan *graphsplit.Plan, s schedule.Schedule, n, steps, solverSlots int) (Cost, error) {
	t, err := Of(plan, n, solverSlots)
	if err != nil {
		return Cost{}, err
	}
	p := len(plan.Stages)
	if err := schedule.Check(s, p, n); err != nil {
		return Cost{}, errors.Wrap(err, "footprint")
	}
	c := Cost{Schedule: s.Name, Workers: p / s.Virtual(), Utilization: 1 - schedule.Measured(s, p, n, steps).Bubble}
	for i, list := range s.Actions(p, n, steps) {
		r := t.Stages[i]
		c.Weights += r.Weights + r.Optimizer
		switch {
		case s.StashWeights:
			c.Weights += r.WeightStash
		case s.Async:
			c.Weights += r.Correction
		}
		var in int64
		for _, pt := range plan.Stages[i].Inputs {
			in += pt.Bytes()
		}
		c.Activations += int64(schedule.InFlight(list)) * in
	}
	return c, nil
}
