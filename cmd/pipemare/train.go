package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/pipemare/pipemare/zoo"
	"github.com/schollz/progressbar/v3"
)

func trainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare train", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	s, err := scheduleNamed(o.schedule)
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	build, train, test, err := o.builder()
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	cfg, err := o.config(s, train.Len())
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "training %s (%d examples) with %s, %s stages, N=%d × %d rows, %d epochs, lr %g (%s), T1 K=%d, T2 γ=%g, warm-up %d steps\n",
		o.model, train.Len(), s.Name, o.stages, cfg.Microbatches, cfg.Microbatch, cfg.Epochs, cfg.LR, cfg.SolverName(), cfg.T1, cfg.T2, cfg.Warmup)
	res, err := trainWithProgress(ctx, build, train, test, cfg, stdout)
	if res != nil && len(res.Epochs) > 0 { // interrupted runs too: what ran
		if werr := writeOutputs(o.out, []*zoo.Result{res}); werr != nil {
			fmt.Fprintf(stderr, "pipemare train: writing %s: %v\n", o.out, werr)
		} else {
			fmt.Fprintf(stdout, "wrote %s/report.json, trace.json and plots\n", o.out)
		}
	}
	return err
}

// onSteps, when set (by tests), is called after each progress update.
var onSteps func(done int)

// trainWithProgress runs zoo.Train with a progress bar per epoch and one
// line per epoch.
func trainWithProgress(ctx context.Context, build zoo.Builder, train, test zoo.Data, cfg zoo.Config, out io.Writer) (*zoo.Result, error) {
	var bar *progressbar.ProgressBar
	epoch := 1
	cfg.ProgressEvery = 5
	cfg.Steps = func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(out),
				progressbar.OptionSetDescription(fmt.Sprintf("epoch %d", epoch)),
				progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(200*time.Millisecond))
		}
		_ = bar.Set(done)
		if onSteps != nil {
			onSteps(done)
		}
	}
	var res *zoo.Result
	cfg.Progress = func(e zoo.EpochResult) {
		if bar != nil {
			_ = bar.Finish()
			bar = nil
		}
		epoch++
		fmt.Fprintf(out, "epoch %d: loss %.4f, test accuracy %.4f, %.0f samples/s, utilization %.3f\n", e.Epoch, e.Loss, e.Accuracy, e.SamplesPerSec, e.Utilization)
	}
	res, err := zoo.Train(ctx, build, train, test, cfg)
	if res != nil && len(res.Epochs) > 0 {
		rep := res.Report
		fmt.Fprintf(out, "%d stages, measured utilization %.3f (bubble %.3f), wall %v\n", res.Stages, rep.Utilization, rep.Bubble, res.Wall.Round(1e6))
	}
	return res, err
}
