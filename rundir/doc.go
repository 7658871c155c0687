// Package rundir is a training run's output directory, as pipemare train
// and compare write it and -resume reads it back: report.json (Report: the
// settings, where the stages ran, what the run measured), settings.json
// (Settings, written before anything trains), trace.json, the trained
// model, the plots, and the checkpoints directory.
//
// Dir checks that every file can be written before a run trains, so that a
// run is never lost to an output path that cannot be written, and writes
// them; StartPoint decides, before anything is created, whether a run
// starts afresh in a directory or continues the checkpoint a resume names,
// and refuses a resume whose settings differ from the run's (naming the
// flags) or whose directory holds no usable checkpoint (naming the previous
// complete one).
//
// The files' keys are snake_case and durations integer nanoseconds;
// settings.json holds the run's specification (runspec.Spec) beside the
// resolved settings. Errors name the settings (*runspec.Error: out,
// resume; runspec.DiffError), which a command words as its flags.
package rundir
