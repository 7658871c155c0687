// Package asyncvm runs a graphsplit.Plan as a pipeline: one worker goroutine
// per stage, microbatches streaming forward and gradients streaming back,
// with the PipeMare asynchronous schedule and the synchronous baselines it is
// measured against (Sequential, GPipe, 1F1B with flush, PipeDream).
//
// A schedule is data: a pure function from (stages, microbatches per
// minibatch, minibatches) to each stage's ordered list of actions (forward of
// microbatch m, backward of m, update, flush). It can be printed (Grid),
// checked without a model (Simulate) and run by the engine. Results depend
// only on the action lists, never on thread timing.
package asyncvm
