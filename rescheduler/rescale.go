package rescheduler

import "math"

// Rescale is the factor T1 multiplies the base rate by at step k of a K-step
// rescheduling phase for a stage with delay tau (≥ 1). It must be 1/τ at
// k = 0 and 1 from k = K on.
type Rescale interface {
	Factor(tau float64, k, phase int) float64
}

// progress is min(k/K, 1), and 1 when there is no phase.
func progress(k, phase int) float64 {
	if phase <= 0 {
		return 1
	}
	return math.Min(float64(k)/float64(phase), 1)
}

// Power is PipeMare's T1 as the paper states it: τ^(−(1 − min(k/K, 1))),
// a geometric path from 1/τ to 1.
type Power struct{}

// Factor returns τ^(−(1 − min(k/K, 1))).
func (Power) Factor(tau float64, k, phase int) float64 {
	p := progress(k, phase)
	if p == 1 || tau == 1 {
		return 1
	}
	return math.Pow(tau, -(1 - p))
}

// Linear goes from 1/τ to 1 in a straight line: 1/τ + (1 − 1/τ)·min(k/K, 1).
type Linear struct{}

// Factor returns 1/τ + (1 − 1/τ)·min(k/K, 1).
func (Linear) Factor(tau float64, k, phase int) float64 {
	p := progress(k, phase)
	if p == 1 || tau == 1 {
		return 1
	}
	return 1/tau + (1-1/tau)*p
}
