// Package correction is PipeMare's discrepancy correction (T2) as a
// decorator around any Gorgonia solver.
//
// In an asynchronous pipeline a stage's forward pass reads weights τ updates
// old while its backward pass reads the current ones, so the gradient mixes
// two models. The correction keeps, per learnable, a velocity estimate
//
//	δ ← γ·δ + (1−γ)·(w_new − w_old)        after every step
//
// and gives the backward pass
//
//	u_bkwd = w − (τ_fwd − τ_bkwd)·δ
//
// an estimate of the weights the forward used. The engine (package asyncvm)
// asks for it before every PipeMare backward through BackwardWeights, with
// the delay that microbatch's forward actually saw.
//
// The package also holds the corrections of Kosson et al., "Pipelined
// Backpropagation at Scale" (MLSys 2021), as decorators of the same kind:
//
//   - Spike (NewSpike): spike compensation, a momentum update whose
//     coefficients a = β^D, b = (1−β^D)/(1−β) make a gradient D steps
//     late move the weights from its arrival on as an undelayed one would;
//   - Predictor (NewPredictor): linear weight prediction, u_fwd = w + D·δ,
//     the weights extrapolated to where they will be when the forward's
//     gradient is applied, supplied to the forward through ForwardWeights.
//
// Every decorator implements only its own hooks (SetDelay, BackwardWeights,
// ForwardWeights, correction buffers, state) and forwards none of the
// solver it wraps: the engine reaches every layer by walking the chain
// (solvers.Chain, Inner), so they compose in any order with T1:
// rescheduler.New(correction.NewPredictor(correction.NewSpike(momentum))).
// Each saves its own fields as a solvers.State (Spike, Predictor).
//
// On the delayed quadratic with β = 0.9 (the theory tests) the largest
// stable step at τ = 10 is αλ = 0.0114 for plain momentum, 0.0160 with
// spike compensation and 0.0143 with prediction; at τ = 1 the three are
// 0.100, 0.253 and 0.270 (closed forms in the tests).
//
// Cost: δ and one weight-sized scratch buffer (w_old during a step, u_bkwd
// between steps) per learnable, against up to τ+1 weight copies for
// PipeDream's stashing; the engine's memory report counts them as
// correction buffers. The scratch buffer cannot go without changing
// results. The backward program reads u_bkwd by reference (it is bound to
// the program's learnable nodes for the backward), so a weight-sized u_bkwd
// exists during every backward: allocating it afresh for each backward
// would halve the resident size reported, not the peak, and cost an
// allocation per backward. w_old cannot be avoided either:
// the change the wrapped solver made, w_new − w_old, is not recoverable
// from w_new and the solver's update in floating point, and writing
// u_bkwd into the weights in place and undoing it afterwards does not give
// the weights back bit for bit. Since the two uses never overlap (a step is
// never inside a backward), one buffer serves both: δ is what the method
// keeps, the scratch buffer is what the engine's backward needs.
//
// A Solver is solvers.Stateful for its own fields (δ, steps, τ, γ; not the
// scratch buffer, nor the wrapped solver's state) and a solvers.Binder: a
// fresh Solver that loaded a State must be bound to the model before its
// first BackwardWeights, which otherwise says so.
package correction
