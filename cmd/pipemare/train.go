package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func trainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare train", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	var s schedule.Schedule // the method's unless -schedule
	if o.schedule != "" {
		var err error
		if s, err = scheduleNamed(o.schedule); err != nil {
			return usageError(fs, "%v", err)
		}
	}
	r, train, test, err := o.load()
	if err != nil {
		return err
	}
	cfg, err := o.config(s, train.Len())
	if err != nil {
		return usageError(fs, "%v", err)
	}
	out := outputs{dir: o.out, files: append([]string{"report.json", "trace.json"}, plotFiles...)}
	if err := out.prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "training %s (%d examples) with %s, %s stages, N=%d × %d rows, %d epochs, lr %g (%s), T1 K=%d, T2 γ=%g, warm-up %d steps\n",
		o.model, train.Len(), runLabel(cfg), o.stages, cfg.Microbatches, cfg.Microbatch, cfg.Epochs, cfg.LR, cfg.SolverName(), cfg.T1, cfg.T2, cfg.Warmup)
	res, err := trainWithProgress(ctx, r.Build, cfg, train, test, stdout, stderr)
	if res == nil || len(res.Epochs) == 0 {
		return err
	}
	// Interrupted runs too: the report of what ran.
	werr := writeRun(out, runReport{Settings: newSettings(&o, cfg, train, test), Result: res}, o.traceSteps)
	if werr == nil {
		fmt.Fprintf(stdout, "wrote %s/report.json, trace.json and plots\n", o.out)
	}
	return errors.Join(err, werr)
}

// writeRun writes train's outputs: report.json, trace.json and the plots.
func writeRun(out outputs, r runReport, traceSteps int) error {
	if err := out.writeJSON("report.json", r); err != nil {
		return err
	}
	if err := out.writeTrace("trace.json", r.Result, traceSteps); err != nil {
		return err
	}
	return writePlots(out.dir, []labelledRun{{label: runLabel(r.Result.Config), res: r.Result}})
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

// trainWithProgress runs zoo.Train with one line per epoch on stdout and,
// when stderr is a terminal, a progress bar per epoch on stderr.
func trainWithProgress(ctx context.Context, build zoo.Builder, cfg zoo.Config, train, test zoo.Data, stdout, stderr io.Writer) (*zoo.Result, error) {
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
	cfg.Progress = func(e zoo.EpochResult) {
		if bar != nil {
			_ = bar.Finish()
			bar = nil
		}
		epoch++
		fmt.Fprintf(stdout, "epoch %d: loss %.4f, test accuracy %.4f, %.0f samples/s, utilization %.3f\n", e.Epoch, e.Loss, e.Accuracy, e.SamplesPerSec, e.Utilization)
	}
	res, err := zoo.Train(ctx, build, train, test, cfg)
	if bar != nil { // an interrupted epoch: clear its bar before the summary
		_ = bar.Clear()
	}
	if res != nil && len(res.Epochs) > 0 {
		if last := res.Epochs[len(res.Epochs)-1]; last.Interrupted {
			fmt.Fprintf(stdout, "epoch %d interrupted after %d steps: loss %.4f\n", last.Epoch, len(last.Losses), last.Loss)
		}
		rep := res.Report
		fmt.Fprintf(stdout, "%d stages, measured utilization %.3f (bubble %.3f), wall %v\n", res.Stages, rep.Utilization, rep.Bubble, res.Wall.Round(time.Millisecond))
	}
	return res, err
}
