package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// planCmd prints a model's plan: its stage table, the balance of its
// stages as measured and their memory (train.PlanReport), and writes its
// Graphviz with -dot.
func planCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare plan", flag.ContinueOnError)
	model := fs.String("model", "resnet", modelUsage(""))
	stages := fs.String("stages", "fine", "number of stages, or fine for one per layer")
	microbatch := fs.Int("microbatch", 16, "rows per microbatch")
	dot := fs.String("dot", "", "also write the cut graph in Graphviz DOT to this file")
	schedName := fs.String("schedule", "", "the schedule the stages will run: zb-v, interleaved and pipemare-v host several stages on each worker, and -stages P then balances the workers (default: a stage per worker)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	r, err := zoo.RecipeFor(*model)
	if err != nil {
		return usageError(fs, "-model %q: %v", *model, err)
	}
	if *microbatch < 1 {
		return usageError(fs, "-microbatch %d: must be positive", *microbatch)
	}
	p := 0 // fine
	if *stages != "fine" {
		if p, err = strconv.Atoi(*stages); err != nil || p < 1 {
			return usageError(fs, "-stages %q: a positive number or fine", *stages)
		}
	}
	var sch schedule.Schedule
	if *schedName != "" {
		if sch, err = runspec.ScheduleNamed(*schedName); err != nil {
			return usageError(fs, "%v", err)
		}
	}
	rep, err := train.MeasurePlan(r, *microbatch, p, sch)
	if err != nil {
		return err
	}
	defer rep.Close()
	var f *os.File
	if *dot != "" { // before printing anything: a path that cannot be written fails first
		if f, err = os.Create(*dot); err != nil {
			return errors.Wrap(err, "-dot")
		}
	}
	if err := rep.Write(stdout); err != nil {
		return err
	}
	if rep.Plan.Balance != nil {
		fmt.Fprintf(stdout, "to run these stages alike on every host, give every process -cut %s\n", runspec.FormatCut(rep.Plan.Cuts()))
	}
	if f == nil {
		return nil
	}
	if err := rep.Plan.WriteDOT(f); err != nil {
		f.Close()
		return errors.Wrapf(err, "writing %s", *dot)
	}
	if err := f.Close(); err != nil {
		return errors.Wrapf(err, "writing %s", *dot)
	}
	fmt.Fprintf(stdout, "wrote %s (render with dot -Tsvg)\n", *dot)
	return nil
}
