// Package asyncvm runs a graphsplit.Plan as a pipeline: one worker goroutine
// per stage, microbatches streaming forward and gradients streaming back,
// with the PipeMare asynchronous schedule and the synchronous baselines it is
// measured against (Sequential, GPipe, 1F1B with flush, PipeDream).
//
//	plan, _ := graphsplit.Split(g, cost, learnables, graphsplit.FineGrained())
//	vm, _ := asyncvm.New(plan, asyncvm.WithSchedule(asyncvm.PipeMare),
//		asyncvm.WithMicrobatches(4),
//		asyncvm.WithSolver(func(stage int) gorgonia.Solver { return gorgonia.NewMomentum() }))
//	defer vm.Close()
//	for _, feeds := range minibatches {
//		loss, err := vm.Step(ctx, feeds)
//		…
//	}
//	vm.Flush(ctx) // apply the updates still in flight
//
// # Schedules are data
//
// A Schedule is a pure function from (stages, microbatches per minibatch,
// minibatches) to each stage's ordered list of actions: forward of
// microbatch m, backward of m, update, flush. It can be printed (Grid),
// checked without a model (Simulate) and run by the engine; results depend
// only on the action lists, never on thread timing, so the same seed gives
// bit-identical weights on any GOMAXPROCS.
//
// # The engine
//
// Everything a stage owns — its compiled programs, solver, gradient
// accumulators, stashes — is built by New and then touched only by its
// worker. Workers exchange freshly allocated tensors over FIFO channels, one
// per direction and pair of stages, sized so that no send waits. Each call
// (Step, Run, Flush) hands every worker the prefix of its action list that
// the supplied data allows and returns when all have run it: between calls
// the pipeline is quiescent and the user's learnables, updated in place,
// hold the current weights. An asynchronous pipeline is not drained between
// calls; Flush drains it.
//
// Per stage, gradients are accumulated over the N microbatches of a
// minibatch as a mean (the cost's gradient is seeded with 1/N), and the
// stage's solver steps its learnables in a fixed order after the last
// backward of each minibatch. Backwards recompute the forward from the
// stashed stage inputs by default (exact with stateful ops; BatchNorm's
// running statistics are restored so nothing counts twice), or read saved
// tensors (WithActivations(Stash)) in stateless stages. PipeDream's
// backwards read a stashed copy of the forward's weights; PipeMare's read the
// current weights, or those a BackwardWeighter solver supplies (the T2
// correction). Dropout is a mask input the engine draws per microbatch from
// the seed (WithDropoutMask).
//
// # Measurements
//
// Every action's start and end, the weight delay every forward saw, and
// memory by category per stage are in Report; Events gives the raw
// timeline, which WriteTrace writes as a Chrome trace, and Replay replays
// it on one virtual device per stage. Any failure in a worker — an op error or panic, a solver
// error, a non-finite loss, gradient or weight — stops every worker and
// comes back as a *StageError naming the stage, action and microbatch.
package asyncvm
