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
// The synchronous schedules — Sequential, GPipe, OneFOneB, ZBH1, ZBH2,
// Interleaved, ZBV — read the weights of the step a forward belongs to;
// all but ZBH2 flush after every step. The asynchronous ones — PipeDream,
// PipeDream2BW, PipeMare, PipeMareVirtual — never flush: stage i runs
// Ahead(P, i) forwards before its first backward, and its forwards read
// weights Delay(P, N, i) updates old.
//
// Qi et al.'s zero-bubble schedules (ZBH1, ZBH2, ZBV; Split) run every
// backward as two actions: OpInput, the gradient of the stage's inputs, on
// the critical path, and later OpWeight, the gradient of its weights.
// Interleaved, ZBV and PipeMareVirtual place v stages on each worker
// (PerWorker, Placement): their order is per worker (Slot lists,
// WorkerLists), and Actions is each stage's share of it. Balance splits
// stages into contiguous blocks by their costs (the Balanced placement,
// which places a run's stages on its processes).
//
// Measured replays them with equal F, I and W times and reads each
// schedule's bubble, activations and weight versions; Formula gives the
// closed form where it holds, and Table both over a range of P and N.
package schedule
