// Package footprint computes, from a plan and without training, the memory a
// pipeline's stages need besides activations: weights, the solver's state,
// and what each asynchronous method adds — PipeMare's T2 keeps one
// weight-sized velocity δ per stage, PipeDream keeps the τ_i older versions
// of a stage's weights that forwards in flight have read (up to τ_i + 1
// versions with the current one), τ_i = ceil((2(P−1−i)+1)/N) being stage
// i's delay. This is the comparison behind the PipeMare paper's "up to 2.7×
// less memory":
//
//	plan, _ := graphsplit.Split(g, cost, learnables, graphsplit.Stages(107))
//	t, _ := footprint.Of(plan, 1, 1) // N = 1, Momentum
//	t.Write(os.Stdout, false)
//
// Activations are left out of Table: both methods run the same
// asynchronous 1F1B schedule, so they hold the same ones (asyncvm's Report
// measures them). ScheduleCost compares any schedules, activations
// included: each stage's inputs times the microbatches its action list
// holds at most, and the utilization of a replay on one device per worker.
// The table counts what the methods need; today's correction.Solver keeps a
// second weight-sized buffer (the weights before the step) that the method
// does not need, and asyncvm's PipeDream copies the current version too at
// each forward (its Report counts those).
package footprint
