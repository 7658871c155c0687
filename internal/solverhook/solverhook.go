// Package solverhook forwards the pipeline engine's optional solver hooks
// (package asyncvm: DelayAware, BackwardWeighter, ForwardWeighter,
// CorrectionSizer) from a solver decorator to the solver it wraps, so that
// decorators compose in any order: a decorator supplies the hooks it
// implements and hands the others to its inner solver with these functions.
package solverhook

import "gorgonia.org/gorgonia"

// SetDelay passes the engine's delay to s when s wants it.
func SetDelay(s gorgonia.Solver, tau float64, measured bool) {
	if da, ok := s.(interface{ SetDelay(float64, bool) }); ok {
		da.SetDelay(tau, measured)
	}
}

// BackwardWeights asks s for the weights a backward reads; nil (the
// current weights) when s supplies none.
func BackwardWeights(s gorgonia.Solver, delay int) ([]gorgonia.Value, error) {
	if bw, ok := s.(interface {
		BackwardWeights(int) ([]gorgonia.Value, error)
	}); ok {
		return bw.BackwardWeights(delay)
	}
	return nil, nil
}

// ForwardWeights asks s for the weights a forward reads; nil (the current
// weights) when s supplies none.
func ForwardWeights(s gorgonia.Solver, delay int) ([]gorgonia.Value, error) {
	if fw, ok := s.(interface {
		ForwardWeights(int) ([]gorgonia.Value, error)
	}); ok {
		return fw.ForwardWeights(delay)
	}
	return nil, nil
}

// CorrectionBytes is the size of s's correction buffers, 0 when it reports
// none.
func CorrectionBytes(s gorgonia.Solver) int64 {
	if cs, ok := s.(interface{ CorrectionBytes() int64 }); ok {
		return cs.CorrectionBytes()
	}
	return 0
}
