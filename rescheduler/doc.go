// Package rescheduler is PipeMare's learning-rate rescheduling (T1) as a
// decorator around any Gorgonia solver.
//
// A stage whose forward passes read weights τ_i updates old is stable only
// with a step about τ_i times smaller (delayed SGD on f(w) = λw²/2 with delay
// τ converges iff αλ < 2·sin(π/(2(2τ+1))) ≈ π/(2τ)). T1 starts stage i at
// α/τ_i and brings it back to the ordinary schedule α_k over the first K
// steps:
//
//	α_{k,i} = α_k · τ_i^(−(1 − min(k/K, 1)))
//
// where k counts the stage's steps and the k of min(k/K, 1) only those taken
// with τ_i > 1, so a synchronous warm-up (PipeMareW, asyncvm.WithWarmup)
// does not use up the phase. α_k is a base Schedule (Constant, StepDecay,
// Cosine, Warmup, composable),
// the τ_i^(…) factor is a Rescale (Power, the formula above, or Linear, which
// interpolates between α_k/τ_i and α_k), and τ_i comes from the pipeline
// engine, which calls SetDelay (solvers.DelayAware).
//
//	solver, err := rescheduler.New(gorgonia.NewMomentum(),
//		rescheduler.WithBase(rescheduler.Cosine(0.1, 0, steps)),
//		rescheduler.WithPhase(1000))
//
// WithPhase is required: K is a number of the run's steps (a natural one is
// every asynchronous step of the run) and has no default that fits every
// run, and K = 0 (T1 off) is asked for explicitly.
//
// Momentum changes the picture: heavy ball with β is stable up to
// αλ < 2(1+β) without delay but only up to αλ < 1−β with a delay of one step,
// and T1 leaves τ = 1 alone. A model whose synchronous training with
// momentum settles near its own edge of stability can blow up when delays
// start; plain SGD loses only a factor 2 at τ = 1 (the zoo's Transformer
// recipe uses it for that reason).
//
// The decorator sets the learning rate of the innermost solver of its
// chain before each step — through solvers.LearnRater (solvers.SGD,
// Momentum, Adam), or gorgonia.WithLearnRate for gorgonia's own solvers:
// scaling gradients instead would do nothing to Adam, which is
// scale-invariant. With τ_i = 1 or K = 0 it is bit-identical to the solver
// it wraps.
//
// A Solver is solvers.Stateful for its own fields only (step counts, τ,
// the last rate); solvers.Save and solvers.Load save and restore every
// layer of a chain.
package rescheduler
