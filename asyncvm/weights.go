package asyncvm

import (
	"gorgonia.org/gorgonia"
)

// BackwardWeighter is implemented by a stage's solver when it supplies the
// weights the stage's backward pass reads under the PipeMare schedule — the
// discrepancy correction (T2) of package correction.
//
// The stage's worker calls BackwardWeights before each backward with the
// delay that microbatch's forward saw (the stage's weight version now minus
// the version at its forward). It returns values parallel to the stage's
// learnables that the backward reads; the worker does not modify them, and
// the solver must not modify them until the next call. Returning nil means
// "use the current weights".
type BackwardWeighter interface {
	BackwardWeights(delay int) ([]gorgonia.Value, error)
}

// ForwardWeighter is implemented by a stage's solver when it supplies the
// weights the stage's forward pass reads under an asynchronous schedule —
// linear weight prediction (package correction's Predictor), which
// extrapolates the weights to where they will be when the forward's
// gradient is applied.
//
// The stage's worker calls ForwardWeights before each forward with the
// number of updates the stage will apply between this forward and the
// update that uses its gradient (the delay the backward will measure;
// τ_i = Delay(P, N, i) in PipeMare's steady state, 0 for a synchronous
// schedule, where the solver returns nil). It returns values parallel to
// the stage's learnables; the worker does not modify them, and the solver
// owns them and must not modify them until its next ForwardWeights,
// BackwardWeights or Step call — the contract of BackwardWeighter. A
// schedule that stashes weights (PipeDream) stashes these values, so the
// backward reads what the forward read. Returning nil means "use the
// current weights".
//
// Not wired into the engine yet.
type ForwardWeighter interface {
	ForwardWeights(delay int) ([]gorgonia.Value, error)
}

// StateSizer is implemented by solvers that report the bytes of optimizer
// state they keep (momentum, Adam's moments), for the memory report; a
// negative value means "unknown, look at the solver I wrap" (Inner).
type StateSizer interface {
	StateBytes() int64
}

// CorrectionSizer is implemented by solvers that keep a correction buffer;
// its bytes are reported apart from optimizer state.
type CorrectionSizer interface {
	CorrectionBytes() int64
}

// DelayAware is implemented by solvers that want the stage's delay τ_i
// (learning-rate rescheduling, T1). The worker calls SetDelay(τ, false)
// before the first step and again whenever the schedule changes (at the end
// of a WithWarmup warm-up) with the delay the running schedule gives the
// stage (τ_i = Delay(P, N, i) for an asynchronous schedule, 1 for a
// synchronous one), and SetDelay(d, true) after every update of an
// asynchronous schedule with d the mean delay the minibatch's forwards saw.
type DelayAware interface {
	SetDelay(tau float64, measured bool)
}

// optimizerStateBytes estimates a gorgonia solver's state: one or two
// weight-sized buffers for the solvers that keep them.
func optimizerStateBytes(s gorgonia.Solver, params int64) int64 {
	if ss, ok := s.(StateSizer); ok {
		if b := ss.StateBytes(); b >= 0 {
			return b
		}
	}
	if in, ok := s.(interface{ Inner() gorgonia.Solver }); ok {
		return optimizerStateBytes(in.Inner(), params)
	}
	switch s.(type) {
	case *gorgonia.AdamSolver, *gorgonia.AdamW:
		return 2 * params
	case *gorgonia.Momentum, *gorgonia.RMSPropSolver, *gorgonia.AdaGradSolver:
		return params
	}
	return 0
}
