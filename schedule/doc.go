// Package schedule holds pipeline schedules as data: pure functions from
// (stages P, microbatches per minibatch N, steps) to every stage's ordered
// list of actions — forward of microbatch m, backward of m, update at the
// end of a step, flush. A schedule can be printed as a clock × stage grid
// (Grid), run without a model on one simulated device per stage (Simulate,
// Replay) and run by the engine (package asyncvm), whose results depend only
// on the action lists, never on thread timing.
//
// Microbatches are numbered across steps: microbatch m belongs to step m/N.
// A step is one minibatch and one optimizer update per stage.
//
// The synchronous schedules — Sequential, GPipe, OneFOneB — flush after
// every step, so every forward reads the weights of the step it belongs to.
// The asynchronous ones — PipeDream and PipeMare — never flush: stage i runs
// Ahead(P, i) forwards before its first backward, and its forwards read
// weights Delay(P, N, i) updates old.
package schedule
