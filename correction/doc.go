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
