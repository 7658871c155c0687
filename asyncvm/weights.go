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

// StateSizer is implemented by solvers that report the bytes of state they
// keep (momentum, Adam's moments, a correction's velocity), for the memory
// report. Decorators forward it from the solver they wrap.
type StateSizer interface {
	StateBytes() int64
}

// CorrectionSizer is implemented by solvers that keep a correction buffer;
// its bytes are reported apart from optimizer state.
type CorrectionSizer interface {
	CorrectionBytes() int64
}

// DelayAware is implemented by solvers that want the stage's delay τ_i
// (learning-rate rescheduling, T1). The worker calls SetDelay once before
// the first step with the schedule's delay for the stage, and again after
// every update with the delays measured so far (mean over the forwards of
// the minibatch just applied).
type DelayAware interface {
	SetDelay(tau float64)
}

// optimizerStateBytes estimates a gorgonia solver's state: one or two
// weight-sized buffers for the solvers that keep them.
func optimizerStateBytes(s gorgonia.Solver, params int64) int64 {
	if ss, ok := s.(StateSizer); ok {
		return ss.StateBytes()
	}
	switch s.(type) {
	case *gorgonia.AdamSolver, *gorgonia.AdamW:
		return 2 * params
	case *gorgonia.Momentum, *gorgonia.RMSPropSolver, *gorgonia.AdaGradSolver:
		return params
	}
	return 0
}
