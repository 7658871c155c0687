package runout

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
)

// TrainRun is the output directory of a pipemare train run (package
// rundir's layout) from before the run trains until it has written what
// it trained.
type TrainRun struct {
	// Dir is the directory and the files the run writes there.
	Dir rundir.Dir
	// Report is report.json as far as it is known: the settings, where
	// the run went on from, and where its stages run (the caller's to
	// fill in); Finish adds the result.
	Report rundir.Report
	// TraceSteps is how many minibatches trace.json holds (0: all).
	TraceSteps int
}

// StartTrainRun readies the directory out for a run with settings st and
// configuration cfg, before anything trains. It decides where the run
// starts — afresh, or from the checkpoint from as how says
// (rundir.StartPoint) — before it creates anything, so that a mistyped
// -resume creates nothing; checks that every file of the run can be
// written (rundir.Dir.Prepare); writes settings.json; and sets cfg's
// Resume and, with cfg.CheckpointEvery, its checkpoints: into out's
// checkpoints directory as an absolute path (the same for stages in other
// processes), each one said on log. It says on log where a resumed run
// goes on from, or that a run resumed if it can (rundir.ResumeIfAny)
// starts afresh.
func StartTrainRun(out, from string, how rundir.Start, st rundir.Settings, cfg *train.Config, traceSteps int, log io.Writer) (*TrainRun, error) {
	c, err := rundir.StartPoint(out, from, how, st)
	if err != nil {
		return nil, err
	}
	r := &TrainRun{Dir: rundir.Dir{Path: out, Files: append([]string{"report.json", "trace.json", rundir.SettingsFile, rundir.ModelFile}, PlotFiles...)},
		Report: rundir.Report{Settings: st}, TraceSteps: traceSteps}
	if err := r.Dir.Prepare(); err != nil {
		return nil, err
	}
	if err := r.Dir.WriteSettings(st); err != nil {
		return nil, err
	}
	if cfg.CheckpointEvery > 0 {
		if cfg.CheckpointDir, err = filepath.Abs(filepath.Join(out, rundir.CheckpointsDir)); err != nil {
			return nil, err
		}
		cfg.Checkpointed = func(step int, dir string) { fmt.Fprintf(log, "checkpoint at step %d: %s\n", step, dir) }
	}
	switch {
	case c != nil:
		cfg.Resume = c.Dir
		r.Report.Resumed = &rundir.Resumed{Checkpoint: c.Dir, Step: c.Manifest.Step}
		fmt.Fprintf(log, "resuming from %s: step %d (epoch %d, minibatch %d)\n", c.Dir, c.Manifest.Step, c.Manifest.Data.Epoch, c.Manifest.Data.Index)
	case how == rundir.ResumeIfAny:
		fmt.Fprintf(log, "no checkpoint in %s yet: starting the run there\n", out)
	}
	return r, nil
}

// Finish writes what res, the run, trained — report.json (Report with
// res), trace.json (TraceSteps), the plots and, for a run that finished
// (res has its weights' fingerprint), the trained model (rundir.ModelFile)
// — and says so on log. An interrupted run writes the model only when its
// pipeline drained (the weights of the steps that ran); a run that
// trained no epoch writes nothing.
func (r *TrainRun) Finish(res *train.Result, log io.Writer) error {
	if res == nil || len(res.Epochs) == 0 {
		return nil
	}
	r.Report.Result = res
	run := Compared{Label: RunLabel(res.Config), Config: res.Config, Result: res}
	if err := WriteRuns(r.Dir, r.Report, []Compared{run}, func(Compared) string { return "trace.json" }, r.TraceSteps); err != nil {
		return err
	}
	model := ""
	if res.WeightsSHA256 != "" {
		if err := checkpoint.SaveModel(filepath.Join(r.Dir.Path, rundir.ModelFile), res.Plan.Learnables); err != nil {
			return err
		}
		model = " " + rundir.ModelFile + ","
	}
	fmt.Fprintf(log, "wrote %s/report.json,%s trace.json and plots\n", r.Dir.Path, model)
	return nil
}

// WriteRuns writes into out report (train's rundir.Report or compare's
// rundir.CompareReport) as report.json, each run's Chrome trace of its
// last traceSteps minibatches (0: all) to the file trace names, and the
// runs' plots (WritePlots).
func WriteRuns(out rundir.Dir, report any, runs []Compared, trace func(Compared) string, traceSteps int) error {
	if err := out.WriteJSON("report.json", report); err != nil {
		return err
	}
	for _, r := range runs {
		if err := out.WriteTrace(trace(r), r.Result, traceSteps); err != nil {
			return err
		}
	}
	return WritePlots(out.Path, runs)
}

// Interruption is the error of a run its context stopped (Ctrl-C,
// SIGTERM), once Finish wrote what ran, in place of the engine's "context
// canceled": the epoch and step it stopped at (in an epoch, or after one
// whose steps all ran, before the next began), what it wrote, and how to
// go on — -resume from the run's last checkpoint, or, with none, that
// -checkpoint-every makes a run resumable. A run whose pipeline drained
// (res has the weights' hash) wrote its weights as they were as the
// model; one that could not drain wrote none.
func (r *TrainRun) Interruption(res *train.Result) error {
	if res == nil || len(res.Epochs) == 0 {
		return errors.Errorf("interrupted before the first step; nothing written to %s", r.Dir.Path)
	}
	last := res.Epochs[len(res.Epochs)-1]
	wrote := fmt.Sprintf("report.json, trace.json and the plots written to %s (no %s: the pipeline could not drain)", r.Dir.Path, rundir.ModelFile)
	if res.WeightsSHA256 != "" {
		wrote = fmt.Sprintf("%s (the weights of the steps that ran), report.json, trace.json and the plots written to %s", rundir.ModelFile, r.Dir.Path)
	}
	msg := fmt.Sprintf("interrupted in epoch %d after step %d; %s", last.Epoch, res.Steps(), wrote)
	if !last.Interrupted {
		msg = fmt.Sprintf("interrupted after epoch %d, at step %d; %s", last.Epoch, res.Steps(), wrote)
	}
	if c, err := checkpoint.Latest(filepath.Join(r.Dir.Path, rundir.CheckpointsDir)); err == nil {
		return runspec.Errorf("%s; resume with {resume} %s (from its checkpoint of step %d)", msg, r.Dir.Path, c.Manifest.Step)
	}
	return runspec.Errorf("%s; no checkpoint to resume from ({checkpoint_every} K makes a run resumable)", msg)
}
