package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare compare", flag.ContinueOnError)
	var o options
	o.register(fs)
	target := fs.Float64("target", 0.8, "test accuracy to time")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	build, train, test, err := o.builder()
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	type run struct {
		label string
		cfg   zoo.Config
	}
	var runs []run
	for _, s := range schedule.All() {
		cfg, err := o.config(s, train.Len())
		if err != nil {
			return bad(fs, stderr, "%v", err)
		}
		if s.StashWeights { // PipeMare's techniques are for PipeMare
			cfg.T1, cfg.T2, cfg.Warmup = 0, 0, 0
		}
		if s.Name == "pipemare" {
			naive := cfg
			naive.T1, naive.T2, naive.Warmup = 0, 0, 0
			runs = append(runs, run{"pipemare (naive)", naive})
			runs = append(runs, run{"pipemare +T1+T2+W", cfg})
			continue
		}
		runs = append(runs, run{s.Name, cfg})
	}
	var results []*zoo.Result
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "schedule\taccuracy\tsamples/s\tutilization\tvirtual util.\tvirtual samples/s\tmemory KiB\tweights KiB\tactivations KiB\ttime to %.2f\t\n", *target)
	for _, r := range runs {
		fmt.Fprintf(stdout, "running %s…\n", r.label)
		res, err := trainWithProgress(ctx, build, train, test, r.cfg, stdout)
		if err != nil && (res == nil || len(res.Epochs) == 0) {
			return fmt.Errorf("%s: %w", r.label, err)
		}
		if err != nil {
			fmt.Fprintf(stdout, "%s stopped: %v\n", r.label, err)
		}
		results = append(results, res)
		v := res.Virtual
		mem := res.Report.Memory
		tta := "—"
		elapsed := time.Duration(0)
		for _, e := range res.Epochs {
			elapsed += e.Wall
			if e.Accuracy >= *target {
				tta = elapsed.Round(10 * time.Millisecond).String()
				break
			}
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.0f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t\n", r.label, res.Accuracy,
			res.Epochs[len(res.Epochs)-1].SamplesPerSec, res.Report.Utilization, v.Utilization, v.SamplesPerSec,
			float64(mem.Total())/1024, float64(mem.StashedWeights)/1024, float64(mem.StashedActivation)/1024, tta)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintln(stdout)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeOutputs(o.out, results); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/report.json, trace.json and plots\n", o.out)
	return ctx.Err()
}
