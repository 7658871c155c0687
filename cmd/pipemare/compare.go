package main

import (
	"context"
	stderrors "errors"
	"flag"
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare compare", flag.ContinueOnError)
	var o options
	o.register(fs)
	target := fs.Float64("target", 0.8, "test accuracy to time")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	r, trainSet, test, err := o.load()
	if err != nil {
		return err
	}
	p, err := stageCount(r, o.stages)
	if err != nil {
		return usageOr(fs, err)
	}
	runs, left, err := experiment.CompareRuns(func(s schedule.Schedule) (train.Config, error) { return o.config(s, trainSet.Len()) }, p)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	for _, l := range left {
		fmt.Fprintf(stdout, "leaving out %s: it needs N ≥ %d microbatches on %d stages, and -microbatches is %d\n", l.Label, schedule.MinN(l.Config.Schedule, p), p, l.Config.Microbatches)
	}
	out := rundir.Dir{Path: o.out, Files: append([]string{"report.json"}, experiment.PlotFiles...)}
	for _, r := range runs {
		out.Files = append(out.Files, r.TraceFile())
	}
	if err := out.Prepare(); err != nil {
		return err
	}
	report := rundir.CompareReport{Model: o.model, TargetAccuracy: *target}
	var done []experiment.Compared
	var trainErr error
	for _, ru := range runs {
		fmt.Fprintf(stdout, "running %s…\n", ru.Label)
		res, err := trainWithProgress(ctx, r.Build, ru.Config, trainSet, test, stdout, stderr)
		if err != nil {
			trainErr = errors.Wrapf(err, "%s", ru.Label)
		}
		if res == nil || len(res.Epochs) == 0 {
			break
		}
		ru.Result = res
		done = append(done, ru)
		report.Runs = append(report.Runs, rundir.Report{Label: ru.Label, Settings: o.settings(ru.Config, trainSet, test),
			TimeToTarget: experiment.TimeToTarget(res, *target), Result: res})
		if err != nil {
			break
		}
	}
	if len(done) == 0 {
		return trainErr
	}
	fmt.Fprintln(stdout)
	if err := experiment.CompareTable(stdout, done, *target); err != nil {
		return err
	}
	werr := writeRuns(out, report, done, experiment.Compared.TraceFile, o.traceSteps)
	if werr == nil {
		fmt.Fprintf(stdout, "wrote %s/report.json, a trace per schedule and plots\n", o.out)
	}
	return stderrors.Join(trainErr, werr)
}

// writeRuns writes report (train's rundir.Report or compare's
// rundir.CompareReport) as report.json, each run's Chrome trace to the file
// trace names, and the runs' plots.
func writeRuns(out rundir.Dir, report any, runs []experiment.Compared, trace func(experiment.Compared) string, traceSteps int) error {
	if err := out.WriteJSON("report.json", report); err != nil {
		return err
	}
	for _, r := range runs {
		if err := out.WriteTrace(trace(r), r.Result, traceSteps); err != nil {
			return err
		}
	}
	return experiment.WritePlots(out.Path, runs)
}
