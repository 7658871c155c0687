// Package train trains the zoo's models with any schedule of the library
// and PipeMare's techniques, and is what cmd/pipemare and the accuracy
// checks run.
//
// A Config is one run: a recipe's numbers (zoo.Hyper), the schedule, the
// cut, and the techniques around each stage's solver (T1, T2, spike
// compensation, weight prediction, NAdam, a synchronous warm-up).
// FromRecipe turns a model's zoo.Recipe into the Config of a named Method
// (the synchronous baseline, naive PipeMare, PipeMare's own, …), and Train
// runs it: it builds the model, cuts it (Split; Balanced measures a cut on
// this machine), streams the epochs through an asyncvm.VM, evaluates each
// epoch on the pipeline's stages (their forward programs only, through
// VM.EvaluateNodes, the same predictions as an Evaluator of the model's
// graph), and returns a Result with the losses, the test
// accuracy, the engine's Report and the trained weights' fingerprint.
//
// Checkpoints and resume: with Config.CheckpointEvery and CheckpointDir a
// run drains its pipeline and writes a checkpoint; Config.Resume continues
// one bit for bit, and refuses a checkpoint of another configuration.
//
// Stages in other processes: a Train with Config.Connect drives stages that
// ServeStage serves, each in its own process with the same Config; every
// process builds the same model and cuts it alike. With
// Config.MaxRestarts and checkpoints, Train restarts a pipeline whose stage
// process died or stalled: it closes the engine, calls Config.Disconnect
// (which ends the processes), connects anew and resumes from the last
// checkpoint, recording each Restart in Result.Restarts; the run ends with
// the weights of a run never interrupted.
//
// Before anything trains, PlanCosts estimates the costs of the stages a
// Config cuts a model into (what the balanced placement splits by), naming
// the setting of a cut it cannot have; MeasurePlan cuts a
// model and times its stages, and its PlanReport (with WriteMemory, the
// stages' memory besides activations) is what pipemare plan shows.
// SavedEval evaluates a trained model file.
//
// Train, Balanced and ServeStage build models one at a time, so several may
// run in one process. Errors name the step, stage or file that failed.
package train
