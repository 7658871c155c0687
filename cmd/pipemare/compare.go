package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

// labelledRun is one labelled training run of compare (or train's only one).
type labelledRun struct {
	label string
	cfg   train.Config
	res   *train.Result
}

// runLabel names a run by its schedule and the techniques it has on:
// "pipemare +T1+T2+W", "pipemare +T1+spike+W", "gpipe".
func runLabel(cfg train.Config) string {
	label := ""
	for _, t := range []struct {
		on   bool
		name string
	}{{cfg.T1 > 0, "+T1"}, {cfg.T2 > 0, "+T2"}, {cfg.Spike, "+spike"}, {cfg.Predict, "+predict"}, {cfg.Warmup > 0, "+W"}} {
		if t.on {
			label += t.name
		}
	}
	if label == "" {
		return cfg.Schedule.Name
	}
	return cfg.Schedule.Name + " " + label
}

// traceFile is the name of a compare run's trace.
func (r labelledRun) traceFile() string {
	slug := strings.NewReplacer(" ", "-", "+", "", "(", "", ")", "").Replace(strings.ToLower(r.label))
	return "trace-" + slug + ".json"
}

// compareRuns are compare's runs: every schedule from the same settings,
// PipeMare twice (naive, and with the techniques the settings turn on,
// named by them), the techniques off for the other schedules.
func compareRuns(o *options, trainLen int) ([]labelledRun, error) {
	var runs []labelledRun
	for _, s := range schedule.All() {
		cfg, err := o.config(s, trainLen)
		if err != nil {
			return nil, err
		}
		if s.StashWeights { // PipeMare's techniques are for PipeMare
			cfg = withoutTechniques(cfg)
		}
		if s.Name != schedule.PipeMare.Name {
			runs = append(runs, labelledRun{label: s.Name, cfg: cfg})
			continue
		}
		runs = append(runs, labelledRun{label: "pipemare (naive)", cfg: withoutTechniques(cfg)})
		if label := runLabel(cfg); label != s.Name {
			runs = append(runs, labelledRun{label: label, cfg: cfg})
		}
	}
	return runs, nil
}

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
	runs, err := compareRuns(&o, trainSet.Len())
	if err != nil {
		return usageError(fs, "%v", err)
	}
	p, err := stageCount(r, o.stages)
	if err != nil {
		return usageOr(fs, err)
	}
	runnable := runs[:0]
	for _, ru := range runs { // PipeDream-2BW needs N ≥ 2P−1
		if min := schedule.MinN(ru.cfg.Schedule, p); ru.cfg.Microbatches < min {
			fmt.Fprintf(stdout, "leaving out %s: it needs N ≥ %d microbatches on %d stages, and -microbatches is %d\n", ru.label, min, p, ru.cfg.Microbatches)
			continue
		}
		runnable = append(runnable, ru)
	}
	runs = runnable
	out := outputs{dir: o.out, files: append([]string{"report.json"}, plotFiles...)}
	for _, r := range runs {
		out.files = append(out.files, r.traceFile())
	}
	if err := out.prepare(); err != nil {
		return err
	}
	report := compareReport{Model: o.model, TargetAccuracy: *target}
	var done []labelledRun
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "schedule\taccuracy\tsamples/s\tutilization\tvirtual util.\tvirtual samples/s\tmemory KiB\tweights KiB\tactivations KiB\ttime to %.2f\t\n", *target)
	var trainErr error
	for _, ru := range runs {
		fmt.Fprintf(stdout, "running %s…\n", ru.label)
		res, err := trainWithProgress(ctx, r.Build, ru.cfg, trainSet, test, stdout, stderr)
		if err != nil {
			trainErr = fmt.Errorf("%s: %w", ru.label, err)
		}
		if res == nil || len(res.Epochs) == 0 {
			break
		}
		ru.res = res
		done = append(done, ru)
		rr := runReport{Label: ru.label, Settings: newSettings(&o, ru.cfg, trainSet, test), Result: res}
		tta := "—"
		if rr.TimeToTarget = experiment.TimeToTarget(res, *target); rr.TimeToTarget > 0 {
			tta = rr.TimeToTarget.Round(10 * time.Millisecond).String()
		}
		report.Runs = append(report.Runs, rr)
		v, mem := res.Virtual, res.Report.Memory
		fmt.Fprintf(tw, "%s\t%.4f\t%.0f\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t\n", ru.label, res.Accuracy,
			res.Epochs[len(res.Epochs)-1].SamplesPerSec, res.Report.Utilization, v.Utilization, v.SamplesPerSec,
			float64(mem.Total())/1024, float64(mem.StashedWeights)/1024, float64(mem.StashedActivation)/1024, tta)
		if err != nil {
			break
		}
	}
	if len(done) == 0 {
		return trainErr
	}
	fmt.Fprintln(stdout)
	if err := tw.Flush(); err != nil {
		return err
	}
	werr := writeCompare(out, report, done, o.traceSteps)
	if werr == nil {
		fmt.Fprintf(stdout, "wrote %s/report.json, a trace per schedule and plots\n", o.out)
	}
	return errors.Join(trainErr, werr)
}

// writeCompare writes compare's outputs: report.json, a trace per run and
// the plots of every run.
func writeCompare(out outputs, report compareReport, runs []labelledRun, traceSteps int) error {
	if err := out.writeJSON("report.json", report); err != nil {
		return err
	}
	for _, r := range runs {
		if err := out.writeTrace(r.traceFile(), r.res, traceSteps); err != nil {
			return err
		}
	}
	return writePlots(out.dir, runs)
}

// writePlots draws the runs' figures into dir (experiment.WritePlots).
func writePlots(dir string, runs []labelledRun) error {
	var l []experiment.Labelled
	for _, r := range runs {
		l = append(l, experiment.Labelled{Label: r.label, Result: r.res})
	}
	return experiment.WritePlots(dir, l)
}
