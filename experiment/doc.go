// Package experiment trains sweeps of zoo runs and summarises them.
//
// A sweep (Sweep) trains a Grid: every Variant — a train.Method, optionally
// with its parameters given, "spike(warmup=0.1,t1=0.5,decay=step)" — at
// every delay Setting (N microbatches, or injected delays), run length (in
// epochs) and seed, on one model. Each run is a run specification
// (runspec.Spec), its configuration the one train.ConfigFor makes of it as
// pipemare train does, so any run of a sweep can be trained again alone,
// bit for bit.
//
// The summary (Report: sweep.json, sweep.md, sweep.svg, gap.svg) has, per
// variant, setting and length, the final accuracy's mean and sample
// standard deviation over seeds, the gap to the baseline (sequential by
// default) seed by seed in points, and the length from which the variant
// stays within Tolerance points of it (Within).
//
// A sweep resumes at two levels. Every finished run is a small JSON Record
// in a run Cache, reused whenever a sweep asks for the same run (same key
// and specification); several sweeps of a model can share one cache. A run under
// way checkpoints every Grid.CheckpointEvery steps into the work directory
// and, when the sweep starts again, goes on from its last checkpoint with
// the same result as an uninterrupted run (train.Config.Resume); its
// checkpoints are removed once it is recorded.
//
// The single runs pipemare train and compare make are package runout's;
// the benches that train pipemare train as child processes are package
// bench's.
package experiment
