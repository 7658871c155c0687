// Package runout is one run as pipemare train, compare and schedule run
// it, from before it trains until it has written its outputs.
//
// TrainRun is a run's output directory from before it trains (where it
// starts, its checkpoints, its settings) until it has written what it
// trained (WriteRuns: the report, the traces, the plots; the model);
// ChooseCut gives it the cut its stages train; Progress shows it training;
// Comparison trains every schedule one after the other and CompareRuns
// tabulates them; Placement and RunStart say where a run trains and how it
// starts. WriteSchedule shows a schedule's grid, WriteReplayTable every
// schedule's replay.
//
// The figures of runs (WritePlots) use the engine's one steady state,
// asyncvm.SteadyState, as the report's utilization does. TimeToTarget is a
// run's training time to a test accuracy, as sweeps, comparisons and
// benches time it.
package runout
