package stage

import (
	"context"
	"time"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/schedule"
	"gorgonia.org/gorgonia"
)

// Config is what a stage runtime needs besides its stage. Every process
// that runs a stage of the same pipeline builds the same Config.
type Config struct {
	// Microbatches is N, the microbatches per step: the cost's gradient is
	// seeded with 1/N, so a step applies the mean gradient.
	Microbatches int
	// Solver steps the stage's learnables, in Stage.Learnables order. The
	// runtime reaches its layers through solvers.Chain (delays, backward
	// and forward weights, state sizes).
	Solver gorgonia.Solver
	// KeepActivations runs the stage's keeping programs (a forward that
	// returns the tensors its backward reads, and a backward that reads
	// them) instead of recomputing the forward in the backward, when the
	// stage has no stateful op.
	KeepActivations bool
	// SplitBackward says the stage's schedules run split backwards
	// (schedule.OpInput, then schedule.OpWeight): the stage builds the
	// programs that compute them in two (split.go). Without it an I runs
	// the whole backward and its W only accumulates.
	SplitBackward bool
	// Discrepancy measures ‖u_bkwd − u_fwd‖/‖u_fwd‖ at every stale
	// backward, keeping a copy of the weights each forward read (a
	// measurement, not counted in the memory report).
	Discrepancy bool
	// DelayLog reports the delay every forward saw (Progress.Delays).
	DelayLog bool
	// ForwardDelays, when set, makes every forward read the weights of
	// ForwardDelays.Delay(stage, m) updates ago (delay injection), from a
	// ring of past versions.
	ForwardDelays delay.Source
	// Turn, when set, is called before every action, with the name of the
	// schedule it runs under: it returns when the action may run, and
	// what to call when it ended (a worker hosting several stages runs
	// their actions one at a time, in its order); an error fails the
	// action.
	Turn func(ctx context.Context, a schedule.Action, sched string) (done func(), err error)
	// Hook, when set, is called before every action; an error or a panic
	// fails the action. It is for fault-injection tests.
	Hook func(a schedule.Action) error
	// FirstOrderTimeout, when positive, bounds how long Serve waits for
	// the driver's first order: a driver that connected and then stalled,
	// or vanished without its connection closing, ends Serve with an
	// error naming the stage. After the first order an idle driver is
	// waited for as long as the link is up.
	FirstOrderTimeout time.Duration
}
