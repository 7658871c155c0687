package main

import (
	"context"
	stderrors "errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// trainFlagSet is train's command line: the flags of the run and its
// outputs (options), and where the stages run and checkpoints
// (trainFlags).
func trainFlagSet() (*flag.FlagSet, *options, *trainFlags) {
	fs := flag.NewFlagSet("pipemare train", flag.ContinueOnError)
	var o options
	o.register(fs)
	var t trainFlags
	t.register(fs)
	return fs, &o, &t
}

func trainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o, t := trainFlagSet()
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if t.checkpointEvery < 0 {
		return usageError(fs, "-checkpoint-every %d: a number of minibatches (0: no checkpoints)", t.checkpointEvery)
	}
	t.procsSet = o.set()["procs"]
	from, how := "", rundir.Fresh
	if t.resume != "" { // the run's output directory
		out, f := rundir.ResumeTarget(t.resume, o.out)
		if t.resume != rundir.ResumeAuto && o.set()["out"] && filepath.Clean(o.out) != out {
			return usageError(fs, "-out %s and -resume %s: a resumed run writes to the directory it resumes (%s)", o.out, t.resume, out)
		}
		o.out, from, how = out, f, rundir.Resume
		if t.resume == rundir.ResumeAuto {
			how = rundir.ResumeIfAny
		}
	}
	where, pl, err := t.place()
	if err == nil {
		err = t.cpu.apply()
	}
	if err != nil {
		return usageOr(fs, err)
	}
	r, trainSet, test, cfg, err := o.run()
	if err != nil {
		return err
	}
	p, err := planStages(r, cfg, o.stages)
	if err == nil {
		err = stagesFit(p, o.stages, t.procs, pl)
	}
	if err != nil {
		return usageOr(fs, err)
	}
	if where == launchedStage { // a stage of a launched pipeline: no outputs of its own
		return serveStage(ctx, r, trainSet, cfg, &t.net, pl, stdout)
	}
	resumeDir := ""
	if how != rundir.Fresh {
		resumeDir = o.out
	}
	if err := chooseCut(&cfg, where, resumeDir, r, trainSet, stdout); err != nil {
		return err
	}
	cfg.CheckpointEvery = t.checkpointEvery
	st := o.settings(cfg, trainSet, test)
	c, err := rundir.StartPoint(o.out, from, how, st) // before -out is created: a mistyped -resume creates nothing
	if err != nil {
		return err
	}
	out := rundir.Dir{Path: o.out, Files: append([]string{"report.json", "trace.json", rundir.SettingsFile, rundir.ModelFile}, experiment.PlotFiles...)}
	if err := out.Prepare(); err != nil {
		return err
	}
	rep := rundir.Report{Settings: st, Placement: t.placement(where, pl)}
	if err := out.WriteSettings(st); err != nil {
		return err
	}
	if cfg.CheckpointEvery > 0 {
		if cfg.CheckpointDir, err = filepath.Abs(filepath.Join(o.out, rundir.CheckpointsDir)); err != nil { // the same path for stages in other processes
			return err
		}
		cfg.Checkpointed = func(step int, dir string) { fmt.Fprintf(stdout, "checkpoint at step %d: %s\n", step, dir) }
	}
	switch {
	case c != nil:
		cfg.Resume = c.Dir
		rep.Resumed = &rundir.Resumed{Checkpoint: c.Dir, Step: c.Manifest.Step}
		fmt.Fprintf(stdout, "resuming from %s: step %d (epoch %d, minibatch %d)\n", c.Dir, c.Manifest.Step, c.Manifest.Data.Epoch, c.Manifest.Data.Index)
	case how == rundir.ResumeIfAny:
		fmt.Fprintf(stdout, "no checkpoint in %s yet: starting the run there\n", o.out)
	}
	fmt.Fprintf(stdout, "training %s (%d examples) with %s, %s stages, N=%d × %d rows, %d epochs, lr %g (%s), T1 K=%d, T2 γ=%g, warm-up %d steps\n",
		o.model, trainSet.Len(), experiment.RunLabel(cfg), o.stages, cfg.Microbatches, cfg.Microbatch, cfg.Epochs, cfg.LR, cfg.SolverName(), cfg.T1, cfg.T2, cfg.Warmup)
	stop, err := t.connect(ctx, &cfg, o, where, pl, rep.Placement, r, trainSet, stdout, stderr)
	if err != nil {
		return err
	}
	res, err := trainWithProgress(ctx, r.Build, cfg, trainSet, test, stdout, stderr)
	err = stderrors.Join(err, stop(err))
	if res == nil || len(res.Epochs) == 0 {
		return err
	}
	// Interrupted runs too: the report of what ran.
	rep.Result = res
	run := experiment.Compared{Label: experiment.RunLabel(res.Config), Config: res.Config, Result: res}
	werr := writeRuns(out, rep, []experiment.Compared{run}, func(experiment.Compared) string { return "trace.json" }, o.traceSteps)
	if werr == nil && res.WeightsSHA256 != "" { // a finished run: its model
		werr = checkpoint.SaveModel(filepath.Join(o.out, rundir.ModelFile), res.Plan.Learnables)
	}
	if werr == nil {
		model := ""
		if res.WeightsSHA256 != "" {
			model = " " + rundir.ModelFile + ","
		}
		fmt.Fprintf(stdout, "wrote %s/report.json,%s trace.json and plots\n", o.out, model)
	}
	return stderrors.Join(err, werr)
}

// onSteps, when set (by tests), is called after each progress update.
var onSteps func(done int)

// isTerminal reports whether w is a terminal (a variable for tests).
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// barThrottle is the least time between two frames of the progress bar
// (a variable for tests).
var barThrottle = 200 * time.Millisecond

// trainWithProgress runs train.Train with one line per epoch on stdout and,
// when stderr is a terminal, a progress bar per epoch on stderr.
func trainWithProgress(ctx context.Context, build zoo.Builder, cfg train.Config, trainSet, test zoo.Data, stdout, stderr io.Writer) (*train.Result, error) {
	var bar *progressbar.ProgressBar
	showBar := isTerminal(stderr)
	epoch := 1
	cfg.ProgressEvery = 5
	cfg.Steps = func(done, total int) {
		if showBar {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription(fmt.Sprintf("epoch %d", epoch)),
					progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(),
					progressbar.OptionThrottle(barThrottle))
			}
			_ = bar.Set(done)
		}
		if onSteps != nil {
			onSteps(done)
		}
	}
	cfg.Progress = func(e train.EpochResult) {
		if bar != nil {
			_ = bar.Finish()
			bar = nil
		}
		epoch++
		fmt.Fprintf(stdout, "epoch %d: loss %.4f, test accuracy %.4f, %.0f samples/s, utilization %.3f\n", e.Epoch, e.Loss, e.Accuracy, e.SamplesPerSec, e.Utilization)
	}
	res, err := train.Train(ctx, build, trainSet, test, cfg)
	if bar != nil { // an interrupted epoch: clear its bar before the summary
		_ = bar.Clear()
	}
	if res != nil && len(res.Epochs) > 0 {
		if last := res.Epochs[len(res.Epochs)-1]; last.Interrupted {
			fmt.Fprintf(stdout, "epoch %d interrupted after %d steps: loss %.4f\n", last.Epoch, len(last.Losses), last.Loss)
		}
		rep := res.Report
		fmt.Fprintf(stdout, "%d stages, measured utilization %.3f (bubble %.3f), wall %v\n", res.Stages, rep.Utilization, rep.Bubble, res.Wall.Round(time.Millisecond))
		if res.WeightsSHA256 != "" {
			fmt.Fprintf(stdout, "trained model: test accuracy %.4f, weights_sha256 %s\n", res.ModelAccuracy, res.WeightsSHA256)
		}
	}
	return res, err
}
