// Package stage is the runtime of one pipeline stage: it owns the stage's
// programs, solver, gradient accumulators, weight versions, kept
// activations and statistics, and shares nothing with the driver or the
// other stages. Everything reaches it as a message on its transport
// endpoint, and it answers with messages, so the same runtime serves a
// stage in the driver's process or in another process.
//
// The driver (package asyncvm) owns the schedule. It sends each stage the
// data inputs of the microbatches it will forward, then a Work: a slice of
// the stage's action list. The stage runs it, exchanging activations and
// gradients directly with the stages it is linked to, and answers Parked.
// A round ends when every busy stage has parked; a synchronous schedule's
// flush is the end of a round. One microbatch m through two stages:
//
//	driver          stage 0                    stage 1 (last)
//	  │── Data m ────▶│                            │
//	  │── Data m (labels) ────────────────────────▶│
//	  │── Work F(m) B(m) ─▶│                       │
//	  │── Work F(m) B(m) ─────────────────────────▶│
//	  │               F(m): forward ── Activation m ──▶ F(m): loss
//	  │               B(m): waits  ◀── Gradient m ──── B(m): backward
//	  │               backward, accumulate          accumulate
//	  │◀─ Parked (events, stats) ─│                 │
//	  │◀─ Parked (losses, events, stats) ───────────│
//
// What a pass reads is one policy (weights.go): forwards read the current
// weights, or under delay injection the weights of d updates ago, or a
// ForwardWeighter solver's prediction; backwards read the current weights,
// the copy their forward read (PipeDream's weight stashing), or a
// BackwardWeighter solver's estimate (PipeMare's T2).
//
// A split backward is two actions (split.go): I(m) runs the
// input-gradient half of the keeping backward (graphsplit.SplitBackward),
// sends the inputs' gradients and keeps what the weight-gradient half
// reads; W(m) runs that half and accumulates the learnables' gradients, in
// microbatch order, so the sums are the bits of B(m). A stage that
// recomputes runs its whole backward at I(m) and keeps the learnables'
// gradients, which W(m) only accumulates.
// Stages a worker hosts in one process wait for their turn before each
// action (Config.Turn).
//
// A failure — an op error or panic, a solver error, a non-finite loss,
// gradient or weight — ends Serve after a Failed answer naming the action.
package stage
