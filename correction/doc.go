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
// correction buffers.
package correction
