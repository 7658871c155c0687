package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
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

// trainCmd trains one run into -out, its stages where the flags place
// them, or serves a stage of a launched pipeline.
func trainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o, t := trainFlagSet()
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	j, err := t.job(fs, o)
	if err != nil {
		return err
	}
	if j.where == launch.LaunchedStage { // a stage process of a launched pipeline: no outputs of its own
		return serveStages(ctx, j.r, j.trainSet, j.cfg, t.net, j.hosted, stdout)
	}
	return t.train(ctx, o, j, stdout, stderr)
}

// trainJob is what train's flags ask for, checked: where the stages run,
// the run and its data, and where it starts (runout.RunStart).
type trainJob struct {
	where launch.Where
	pl    launch.Place
	// hosted are the places of the stages this process serves under a
	// launcher (launch.Launched): beside the driver at rank 0.
	hosted         []launch.Place
	r              zoo.Recipe
	trainSet, test zoo.Data
	cfg            train.Config
	from           string
	how            rundir.Start
}

// job checks train's flags, pins this process (-cpus) and loads the run's
// data; o.out becomes the directory of a resumed run. Errors of the
// command line are usage errors.
func (t *trainFlags) job(fs *flag.FlagSet, o *options) (j trainJob, err error) {
	if t.checkpointEvery < 0 {
		return j, usageError(fs, "-checkpoint-every %d: a number of minibatches (0: no checkpoints)", t.checkpointEvery)
	}
	t.procsSet = o.set()["procs"]
	if err := t.checkRestarts(fs); err != nil {
		return j, err
	}
	if o.out, j.from, j.how, err = runout.RunStart(t.resume, o.out, o.set()["out"]); err != nil {
		return j, usageError(fs, "%v", err)
	}
	j.where, j.pl, err = t.place()
	if err == nil {
		err = t.cpu.apply()
	}
	if err != nil {
		return j, usageOr(fs, err)
	}
	if j.r, j.trainSet, j.test, j.cfg, err = o.run(); err != nil {
		return j, err
	}
	j.pl.Spec = train.Resolved(j.r, j.cfg)
	costs, err := fitPlan(j.r, j.cfg, o.stages, t.procs, j.pl)
	if err == nil && (j.where == launch.LaunchedFirst || j.where == launch.LaunchedStage) {
		if j.hosted, err = launch.Launched(j.pl, nil, costs); err != nil {
			err = usageErr{err}
		}
	}
	return j, usageOr(fs, err)
}

// train trains j into its run directory (runout.TrainRun): the cut
// chosen (runout.ChooseCut), the stages connected where they run,
// and what trained written, interrupted runs included.
func (t *trainFlags) train(ctx context.Context, o *options, j trainJob, stdout, stderr io.Writer) (err error) {
	cfg := j.cfg
	resumeDir := ""
	if j.how != rundir.Fresh {
		resumeDir = o.out
	}
	if err := runout.ChooseCut(&cfg, j.where, t.net.Transport, resumeDir, j.r, j.trainSet, stdout); err != nil {
		return err
	}
	cfg.CheckpointEvery = t.checkpointEvery
	run, err := runout.StartTrainRun(o.out, j.from, j.how, o.settings(cfg, j.trainSet, j.test), &cfg, o.traceSteps, stdout)
	if errors.Is(err, rundir.ErrFinished) { // a finished run restarted (-resume auto): nothing to do
		fmt.Fprintf(stdout, "%v\n", inFlags(err))
		return nil
	}
	if err != nil {
		return err
	}
	run.Report.Placement = runout.Placement(j.where, j.pl, t.net, t.cpu.cpus)
	fmt.Fprintf(stdout, "training %s (%d examples) with %s, %s stages, N=%d × %d rows, %d epochs, lr %g (%s), T1 K=%d, T2 γ=%g, warm-up %d steps\n",
		o.model, j.trainSet.Len(), runout.RunLabel(cfg), o.stages, cfg.Microbatches, cfg.Microbatch, cfg.Epochs, cfg.LR, cfg.SolverName(), cfg.T1, cfg.T2, cfg.Warmup)
	stop := t.connect(ctx, &cfg, o, j, run.Report.Placement, stdout, stderr)
	res, err := trainWithProgress(ctx, j.r.Build, cfg, j.trainSet, j.test, stdout, stderr)
	err = errors.Join(err, stop(err))
	if ctx.Err() != nil && errors.Is(err, context.Canceled) { // Ctrl-C: say where it stopped, not the engine's error
		err = nil
		defer func() { err = errors.Join(run.Interruption(res), err) }()
	}
	return errors.Join(err, run.Finish(res, stdout))
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
// when stderr is a terminal, a progress bar per epoch on stderr
// (runout.Progress).
func trainWithProgress(ctx context.Context, build zoo.Builder, cfg train.Config, trainSet, test zoo.Data, stdout, stderr io.Writer) (*train.Result, error) {
	p := runout.Progress{Log: stdout, Throttle: barThrottle, Steps: onSteps}
	if isTerminal(stderr) {
		p.Bar = stderr
	}
	return p.Train(ctx, build, trainSet, test, cfg)
}
