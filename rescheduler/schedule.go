package rescheduler

import "math"

// Schedule is a base learning-rate schedule: α_k, the rate at optimizer
// step k (from 0) before any delay rescaling.
type Schedule interface {
	Rate(k int) float64
}

// ScheduleFunc adapts a function to Schedule.
type ScheduleFunc func(k int) float64

// Rate calls f.
func (f ScheduleFunc) Rate(k int) float64 { return f(k) }

// Constant is α at every step.
func Constant(alpha float64) Schedule {
	return ScheduleFunc(func(int) float64 { return alpha })
}

// StepDecay multiplies base's rate by factor every `every` steps (the
// classic "divide by 10 at epochs 30, 60" schedule with factor 0.1).
func StepDecay(base Schedule, every int, factor float64) Schedule {
	return ScheduleFunc(func(k int) float64 {
		r := base.Rate(k)
		if every > 0 {
			r *= math.Pow(factor, float64(k/every))
		}
		return r
	})
}

// Cosine anneals from alpha to min over total steps (and stays at min).
func Cosine(alpha, min float64, total int) Schedule {
	return ScheduleFunc(func(k int) float64 {
		if total <= 0 || k >= total {
			return min
		}
		return min + (alpha-min)*(1+math.Cos(math.Pi*float64(k)/float64(total)))/2
	})
}

// Warmup ramps base's rate linearly from base.Rate(0)/steps up to base's
// rate over the first steps steps (Goyal et al.'s linear warm-up), then
// follows base.
func Warmup(base Schedule, steps int) Schedule {
	return ScheduleFunc(func(k int) float64 {
		r := base.Rate(k)
		if k < steps {
			r *= float64(k+1) / float64(steps)
		}
		return r
	})
}

// Milestones multiplies base's rate by factor at each of the given steps
// (PyTorch's MultiStepLR): Milestones(Constant(0.1), 0.1, 30, 60) is 0.1,
// then 0.01 from step 30, then 0.001 from step 60.
func Milestones(base Schedule, factor float64, at ...int) Schedule {
	return ScheduleFunc(func(k int) float64 {
		r := base.Rate(k)
		for _, m := range at {
			if k >= m {
				r *= factor
			}
		}
		return r
	})
}
