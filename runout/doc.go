// Package runout is one run as pipemare train, compare and schedule run
// it, from before it trains until it has written its outputs.
//
// TrainRun is a run's output directory from before it trains (where it
// starts, its checkpoints, its settings) until it has written what it
// trained (WriteRuns: the report, the traces, the plots; the model);
// ChooseCut gives it the cut its stages train; Progress shows it training;
// Comparison trains every schedule one after the other and CompareRuns
// tabulates them; Placement is what the report says of where the stages
// run, RunStart where the run writes and whether it resumes.
// WriteSchedule shows a schedule's grid, WriteReplayTable every
// schedule's replay.
//
// The figures of runs (WritePlots) use the engine's one steady state,
// asyncvm.SteadyState, as the report's utilization does. TimeToTarget is a
// run's training time to a test accuracy, as sweeps, comparisons and
// benches time it.
package runout
