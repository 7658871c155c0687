package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/experiment"
)

// sweepFlags are sweep's command line: the grid and its lists, and where
// the sweep writes.
type sweepFlags struct {
	g               experiment.Grid
	lists           experiment.GridLists
	out, runs, work string
	jobs            int
}

func (f *sweepFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.g.Model, "model", "resnet", modelUsage(""))
	fs.StringVar(&f.g.Data, "data", "embedded", "data, as for train")
	fs.StringVar(&f.lists.Methods, "methods", methodNames(), "variants to compare, comma-separated: a method, or a method with parameters, method(key=value,…): warmup (fraction of the run), t1 (T1's K, fraction of the asynchronous steps), t2, lr, momentum, decay (cosine, step, constant)")
	fs.StringVar(&f.lists.Microbatches, "microbatches", "16,8,4,2", "values of N, comma-separated, each at the recipe's minibatch (N × rows); empty for none")
	fs.StringVar(&f.lists.Delays, "delays", "", "injected delays at the recipe's N, comma-separated: fixed:D (every stage D updates late) or exp:μ (truncated exponential of mean μ); the methods' warm-ups are off, as the delays start at the first step")
	fs.StringVar(&f.lists.Epochs, "epochs", "0", "run lengths in epochs, comma-separated (0: the model's recipe)")
	fs.StringVar(&f.lists.Seeds, "seeds", "1,2,3", "seeds, comma-separated")
	fs.StringVar(&f.g.Stages, "stages", "fine", "number of stages, or fine for one per layer")
	fs.StringVar(&f.g.Baseline, "baseline", "sequential", "the variant gaps are measured against (one of -methods)")
	fs.IntVar(&f.g.Limit, "limit", 0, "use only the first n training examples (0: all)")
	fs.IntVar(&f.g.TestLimit, "test-limit", 0, "measure test accuracy on only the first n test examples (0: all)")
	fs.IntVar(&f.jobs, "jobs", 1, "trainings at a time")
	fs.IntVar(&f.g.CheckpointEvery, "checkpoint-every", 1000, "each run's checkpoint interval in steps (0: none), so that an interrupted run goes on from its last checkpoint; part of what a run trains (a checkpoint drains the pipeline)")
	fs.Float64Var(&f.g.Target, "target", 0.8, "test accuracy to time")
	fs.StringVar(&f.out, "out", "out/sweep", "output directory: "+fmt.Sprint(experiment.Files))
	fs.StringVar(&f.runs, "runs", "", "the run cache: a small JSON per finished run, reused when a sweep asks for the same run (default: -out/runs)")
	fs.StringVar(&f.work, "work", "", "checkpoints of the runs under way, removed as each is recorded (default: -out/checkpoints)")
}

func sweepCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare sweep", flag.ContinueOnError)
	var f sweepFlags
	f.register(fs)
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	s, err := f.sweep(fs)
	if err != nil {
		return err
	}
	s.Log = stdout
	rep, err := s.Run(ctx)
	if rep != nil {
		fmt.Fprintf(stdout, "\n%s\nwrote %s/sweep.md, sweep.json, sweep.svg, gap.svg; runs in %s\n", rep.Markdown(), f.out, s.Cache.Dir)
	}
	return err
}

// sweep is the sweep the flags ask for, its data loaded; a wrong flag is
// a usage error.
func (f *sweepFlags) sweep(fs *flag.FlagSet) (*experiment.Sweep, error) {
	g := f.g
	if f.jobs < 1 {
		return nil, usageError(fs, "-jobs %d: trainings at a time, at least 1", f.jobs)
	}
	if err := checkTarget(g.Target); err != nil {
		return nil, usageError(fs, "%v", err)
	}
	if err := f.lists.Parse(&g); err != nil {
		return nil, usageError(fs, "%v", err)
	}
	var o options // train's flags, to check and load as train does
	o.register(flag.NewFlagSet("", flag.ContinueOnError))
	o.fs = fs
	o.model, o.data, o.stages, o.limit, o.testLimit = g.Model, g.Data, g.Stages, g.Limit, g.TestLimit
	r, trainSet, test, err := o.load()
	if err != nil {
		return nil, err
	}
	if _, err := stageCount(r, g.Stages); err != nil {
		return nil, usageOr(fs, err)
	}
	if err := experiment.Fill(g.Settings, r.Run, 1); err != nil { // a usage error here; Run fills τ_0 on the plan's stages
		return nil, usageError(fs, "-microbatches: %v", err)
	}
	return &experiment.Sweep{Grid: g, Recipe: r, TrainData: trainSet, TestData: test, Cache: experiment.Cache{Dir: f.runs},
		Work: f.work, Out: f.out, Jobs: f.jobs}, nil
}
