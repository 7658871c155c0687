package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

// compareCmd trains every schedule on the same model, data and seed one
// after the other (runout.Comparison) and prints the table.
func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare compare", flag.ContinueOnError)
	var o options
	o.register(fs)
	target := fs.Float64("target", 0.8, "test accuracy to time")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := checkTarget(*target); err != nil {
		return usageError(fs, "%v", err)
	}
	r, trainSet, test, err := o.load()
	if err != nil {
		return err
	}
	p, err := stageCount(r, o.stages)
	if err != nil {
		return usageOr(fs, err)
	}
	runs, left, err := runout.CompareRuns(func(s schedule.Schedule) (train.Config, error) { return o.config(s, trainSet.Len()) }, p)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	for _, l := range left {
		fmt.Fprintf(stdout, "leaving out %s: it needs N ≥ %d microbatches on %d stages, and -microbatches is %d\n", l.Label, schedule.MinN(l.Config.Schedule, p), p, l.Config.Microbatches)
	}
	return runout.Comparison{Model: o.model, Target: *target, TraceSteps: o.traceSteps, Log: stdout,
		Train: func(ctx context.Context, cfg train.Config) (*train.Result, error) {
			return trainWithProgress(ctx, r.Build, cfg, trainSet, test, stdout, stderr)
		},
		Settings: func(cfg train.Config) rundir.Settings { return o.settings(cfg, trainSet, test) },
	}.Run(ctx, o.out, runs)
}

// checkTarget refuses a -target that is not a test accuracy a run can
// reach: in (0, 1].
func checkTarget(target float64) error {
	if !(target > 0 && target <= 1) { // NaN too
		return errors.Errorf("-target %g: a test accuracy, in (0, 1]", target)
	}
	return nil
}
