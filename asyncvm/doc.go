// Package asyncvm runs a graphsplit.Plan as a pipeline: one stage runtime
// per stage, microbatches streaming forward and gradients streaming back,
// with the PipeMare asynchronous schedule and the synchronous baselines it is
// measured against (package schedule: Sequential, GPipe, 1F1B with flush,
// PipeDream).
//
//	plan, _ := graphsplit.Split(g, cost, learnables, graphsplit.FineGrained())
//	vm, _ := asyncvm.New(plan, asyncvm.WithSchedule(schedule.PipeMare()),
//		asyncvm.WithMicrobatches(4),
//		asyncvm.WithSolver(func(stage int) gorgonia.Solver { return gorgonia.NewMomentum() }))
//	defer vm.Close()
//	for _, feeds := range minibatches {
//		loss, err := vm.Step(ctx, feeds)
//		…
//	}
//	vm.Flush(ctx) // apply the updates still in flight
//
// # The driver
//
// A VM is the pipeline's driver. It owns the schedule and the data; each
// stage is a stage.Runtime that owns everything of its stage — programs,
// solver, gradient accumulators, weight versions, kept activations — and
// the two speak only through messages on a transport (package transport):
// the driver sends each stage its data and a slice of its action list, the
// stages exchange activations and gradients directly, and each answers
// with its losses, measurements or failure. Each call (Step, Run, Stream,
// Flush) hands every stage the prefix of its action list the supplied data
// allows and returns when all have run it: between calls the pipeline is
// quiescent and the user's learnables, updated in place, hold the current
// weights. Within a call the pipeline streams: Stream reads its source
// ahead and hands out work while the stages still run earlier work, so
// the pipeline waits for nobody between minibatches (a synchronous
// schedule still stops at each flush: that is what a flush is). An
// asynchronous pipeline is not drained between calls either; Flush drains
// it. Train long runs with one Stream (or Run) per stretch between the
// points where the weights are read, not a Step per minibatch.
// Results depend only on the action lists, never on thread timing, so the
// same seed gives bit-identical weights on any GOMAXPROCS.
//
// Per stage, gradients are accumulated over the N microbatches of a
// minibatch as a mean, and the stage's solver steps its learnables in a
// fixed order after the last backward of each minibatch. Backwards
// recompute the forward from the kept stage inputs by default (exact with
// stateful ops), or read kept tensors (WithActivations(Keep)) in stateless
// stages; a last stage whose backward follows its forward (Sequential,
// 1F1B) runs both passes as one, its forward once. Its forward's event
// then spans both passes, and its backward's only the accumulation. PipeDream's backwards read a stashed copy of the forward's
// weights; PipeMare's read the current weights, or those the solver
// supplies (T2). Dropout is a mask input the engine draws per microbatch
// from the seed (WithDropoutMask). NewInjected trains with injected delays
// instead of a pipeline's, over the same stage runtimes.
//
// # Measurements
//
// Every action's start and end, the weight delay every forward saw, and
// memory by category per stage are in Report; Events gives the raw
// timeline, which WriteTrace writes as a Chrome trace, and Replay replays
// it on one virtual device per stage. Any failure in a stage — an op error
// or panic, a solver error, a non-finite loss, gradient or weight — stops
// every stage and comes back as a *StageError naming the stage, action and
// step.
package asyncvm
