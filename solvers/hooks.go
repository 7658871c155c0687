package solvers

import (
	"gorgonia.org/gorgonia"
)

// The hooks a pipeline engine calls on a stage's solver. Each layer of a
// decorated solver implements the ones it needs for its own purpose and
// never forwards them: the engine reaches every layer through Chain, with
// the functions below.

// DelayAware is implemented by a solver layer that wants the stage's delay
// (T1 rescales its rate with it; T2 may derive its γ from it). The engine
// calls SetDelay(τ, false) before the first step and whenever the schedule
// changes (after a synchronous warm-up) with the delay the running schedule
// gives the stage (τ_i = ceil((2(P−1−i)+1)/N) for an asynchronous
// schedule, 0 for a synchronous one, the mean injected delay under delay
// injection), and SetDelay(d, true) after every update of a delayed
// schedule with d the mean delay the step's forwards saw. The delays are
// the true ones: a layer that divides by the delay (T1) counts below 1 as
// 1 itself.
type DelayAware interface {
	SetDelay(tau float64, measured bool)
}

// BackwardWeighter is implemented by a solver layer that supplies the
// weights a stage's backward reads when its forward read older ones (T2's
// estimate of those older weights). The engine calls BackwardWeights before
// each backward of a delayed schedule with the delay that microbatch's
// forward saw. The values are parallel to the stage's learnables; the
// engine reads them and does not modify them, and the solver must not
// modify them until its next call or step. nil means "the current
// weights".
type BackwardWeighter interface {
	BackwardWeights(delay int) ([]gorgonia.Value, error)
}

// ForwardWeighter is implemented by a solver layer that supplies the
// weights a stage's forward reads (a prediction of the weights the
// gradient will be applied to). The engine calls ForwardWeights before each
// forward of a delayed schedule with the delay the schedule gives that
// forward. Same contract as BackwardWeighter.
type ForwardWeighter interface {
	ForwardWeights(delay int) ([]gorgonia.Value, error)
}

// StateSizer is implemented by a solver layer that reports the bytes of
// optimizer state it keeps itself (a velocity, Adam's moments), for the
// memory report.
type StateSizer interface {
	StateBytes() int64
}

// CorrectionSizer is implemented by a solver layer that keeps correction
// buffers (T2's δ); they are reported apart from optimizer state.
type CorrectionSizer interface {
	CorrectionBytes() int64
}

// SetDelay tells every layer of s that is DelayAware.
func SetDelay(s gorgonia.Solver, tau float64, measured bool) {
	for _, l := range Chain(s) {
		if d, ok := l.(DelayAware); ok {
			d.SetDelay(tau, measured)
		}
	}
}

// BackwardWeights asks the layers of s, outermost first, for the weights a
// backward with the given delay reads, and returns the first answer that is
// not nil (nil: the current weights).
func BackwardWeights(s gorgonia.Solver, delay int) ([]gorgonia.Value, error) {
	for _, l := range Chain(s) {
		if b, ok := l.(BackwardWeighter); ok {
			vals, err := b.BackwardWeights(delay)
			if err != nil || vals != nil {
				return vals, err
			}
		}
	}
	return nil, nil
}

// ForwardWeights is BackwardWeights for the forward (ForwardWeighter).
func ForwardWeights(s gorgonia.Solver, delay int) ([]gorgonia.Value, error) {
	for _, l := range Chain(s) {
		if f, ok := l.(ForwardWeighter); ok {
			vals, err := f.ForwardWeights(delay)
			if err != nil || vals != nil {
				return vals, err
			}
		}
	}
	return nil, nil
}

// HasForwardWeights reports whether some layer of s supplies forward
// weights, so that an engine keeps the bookkeeping only when it is needed.
func HasForwardWeights(s gorgonia.Solver) bool {
	for _, l := range Chain(s) {
		if _, ok := l.(ForwardWeighter); ok {
			return true
		}
	}
	return false
}

// StateBytes is the optimizer state of every layer of s, for learnables of
// paramBytes bytes in all: what each StateSizer layer reports, and for
// gorgonia's own solvers, which report nothing, one or two weight-sized
// buffers by kind.
func StateBytes(s gorgonia.Solver, paramBytes int64) int64 {
	var sum int64
	for _, l := range Chain(s) {
		if ss, ok := l.(StateSizer); ok {
			sum += ss.StateBytes()
			continue
		}
		switch l.(type) {
		case *gorgonia.AdamSolver, *gorgonia.AdamW:
			sum += 2 * paramBytes
		case *gorgonia.Momentum, *gorgonia.RMSPropSolver, *gorgonia.AdaGradSolver:
			sum += paramBytes
		}
	}
	return sum
}

// CorrectionBytes is the correction buffers of every layer of s.
func CorrectionBytes(s gorgonia.Solver) int64 {
	var sum int64
	for _, l := range Chain(s) {
		if c, ok := l.(CorrectionSizer); ok {
			sum += c.CorrectionBytes()
		}
	}
	return sum
}
