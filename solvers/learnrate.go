package solvers

// LearnRater is implemented by solvers whose learning rate can be read and
// set between steps: SGD, Momentum and Adam. T1's rescheduler sets the
// rate of the innermost solver of its chain before every step through it.
type LearnRater interface {
	LearnRate() float64
	SetLearnRate(eta float64)
}
