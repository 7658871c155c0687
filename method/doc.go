// Package method holds the ways of training a pipeline as values, as
// gonum's optimize passes a method: a Method is a schedule and how each
// stage's solver chain is built from the parts of packages solvers,
// correction and rescheduler.
//
// A stage's chain is, from the inside out:
//
//	Optimizer      solvers.SGD, Momentum or NAdam (what a stage would step with alone)
//	Techniques     correction.NewSpike, NewPredictor, New (T2), innermost first
//	rate layer     rescheduler.New: T1 over K steps around the base schedule Rate
//
// The learning rate has one owner, the rate layer: it sets the innermost
// solver's rate from Rate (and T1's rescaling) before every step. It is
// always the outermost layer, T1 or not (T1 = 0 leaves Rate alone), so a
// chain, and a checkpoint of it, has the same layers whatever the method.
//
// A Method builds what it is given; it does not judge what may combine
// with what (weight prediction with T2, spike compensation without
// momentum): the run's configuration refuses those before it builds one.
//
//	m := method.PipeMare()
//	m.Optimizer = method.Momentum{Beta: 0.9}
//	m.Rate = rescheduler.Constant(0.03)
//	m.T1, m.Techniques = 1000, []method.Technique{method.T2{Gamma: 0.9}}
//	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(m.Schedule), asyncvm.WithSolverFactory(m.Solver))
package method
