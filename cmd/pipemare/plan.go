package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/pipemare/pipemare/graphsplit"
)

func planCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare plan", flag.ContinueOnError)
	model := fs.String("model", "resnet", "model: mlp, cnn, resnet or transformer")
	stages := fs.String("stages", "fine", "number of stages, or fine for one per layer")
	microbatch := fs.Int("microbatch", 16, "rows per microbatch")
	dot := fs.String("dot", "", "also write the cut graph in Graphviz DOT to this file")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	o := options{model: *model, stages: *stages, microbatch: *microbatch, microbatches: 1, data: "embedded"}
	build, _, _, err := o.builder()
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if *stages != "fine" {
		p, err := strconv.Atoi(*stages)
		if err != nil || p < 1 {
			return bad(fs, stderr, "-stages %q: a positive number or fine", *stages)
		}
		opts = append(opts, graphsplit.Stages(p))
	}
	m, err := build(*microbatch, 1)
	if err != nil {
		return err
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s at microbatch %d: %d stages\n", m.Name, *microbatch, len(plan.Stages))
	if err := plan.WriteTable(stdout); err != nil {
		return err
	}
	if *dot != "" {
		f, err := os.Create(*dot)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := plan.WriteDOT(f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s (render with dot -Tsvg)\n", *dot)
	}
	return nil
}
