package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/zoo"
)

func planCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare plan", flag.ContinueOnError)
	model := fs.String("model", "resnet", modelUsage(""))
	stages := fs.String("stages", "fine", "number of stages, or fine for one per layer")
	microbatch := fs.Int("microbatch", 16, "rows per microbatch")
	dot := fs.String("dot", "", "also write the cut graph in Graphviz DOT to this file")
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
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if *stages != "fine" {
		p, err := strconv.Atoi(*stages)
		if err != nil || p < 1 {
			return usageError(fs, "-stages %q: a positive number or fine", *stages)
		}
		opts = append(opts, graphsplit.Stages(p))
	}
	m, err := r.Build(*microbatch, 1)
	if err != nil {
		return err
	}
	trainSet, _, err := r.Load("", m.Batch)
	if err != nil {
		return err
	}
	feeds := zoo.FirstMicrobatch(trainSet, m)
	keep := r.Run.KeepActivations
	if *stages != "fine" { // balanced by measuring, on one thread, as train does
		opts = append(opts, graphsplit.Profiled(feeds, keep))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return err
	}
	defer plan.Close()
	var times []graphsplit.StageTime
	if plan.Balance != nil {
		times = plan.Balance.Times // what the cut was chosen by
	} else if times, err = plan.Time(feeds, keep, 5); err != nil {
		return err
	}
	var f *os.File
	if *dot != "" { // before printing anything: a path that cannot be written fails first
		if f, err = os.Create(*dot); err != nil {
			return errors.Wrap(err, "-dot")
		}
	}
	fmt.Fprintf(stdout, "%s at microbatch %d: %d stages\n", m.Name, *microbatch, len(plan.Stages))
	if err := plan.WriteTable(stdout); err != nil {
		return err
	}
	if err := plan.WriteBalance(stdout, times); err != nil {
		return err
	}
	if err := writeMemory(stdout, m.Name, plan); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	if err := plan.WriteDOT(f); err != nil {
		f.Close()
		return errors.Wrapf(err, "writing %s", *dot)
	}
	if err := f.Close(); err != nil {
		return errors.Wrapf(err, "writing %s", *dot)
	}
	fmt.Fprintf(stdout, "wrote %s (render with dot -Tsvg)\n", *dot)
	return nil
}
