package runout

import (
	"context"
	stderrors "errors"
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"
)

// Comparison is how pipemare compare trains its runs (CompareRuns) and
// writes them.
type Comparison struct {
	// Model is the model every run trains, for report.json.
	Model string
	// Target is the test accuracy whose time the table and the report
	// give (TimeToTarget).
	Target float64
	// Train trains one run (train.Train, with progress on Log).
	Train func(ctx context.Context, cfg train.Config) (*train.Result, error)
	// Settings are a run's settings as report.json records them.
	Settings func(cfg train.Config) rundir.Settings
	// TraceSteps is how many minibatches each run's trace holds (0: all).
	TraceSteps int
	// Log receives a line before each run, then the table.
	Log io.Writer
}

// Run trains runs one after the other and writes what trained into the
// directory out: the table (CompareTable) on Log, report.json (a
// rundir.CompareReport), a trace per run (Compared.TraceFile) and the
// plots. It checks that every file can be written before anything trains
// (rundir.Dir.Prepare). A run that fails, or is interrupted, ends the
// comparison: the runs before it, and it if it trained an epoch, are
// written, and its error, naming its label, is returned with any error of
// writing. When no run trained an epoch nothing is written.
func (c Comparison) Run(ctx context.Context, dir string, runs []Compared) error {
	out := rundir.Dir{Path: dir, Files: append([]string{"report.json"}, PlotFiles...)}
	for _, r := range runs {
		out.Files = append(out.Files, r.TraceFile())
	}
	if err := out.Prepare(); err != nil {
		return err
	}
	report := rundir.CompareReport{Model: c.Model, TargetAccuracy: c.Target}
	var done []Compared
	var trainErr error
	for _, ru := range runs {
		fmt.Fprintf(c.Log, "running %s…\n", ru.Label)
		res, err := c.Train(ctx, ru.Config)
		if err != nil {
			trainErr = errors.Wrapf(err, "%s", ru.Label)
		}
		if res == nil || len(res.Epochs) == 0 {
			break
		}
		ru.Result = res
		done = append(done, ru)
		report.Runs = append(report.Runs, rundir.Report{Label: ru.Label, Settings: c.Settings(ru.Config),
			TimeToTarget: TimeToTarget(res, c.Target), Result: res})
		if err != nil {
			break
		}
	}
	if len(done) == 0 {
		return trainErr
	}
	fmt.Fprintln(c.Log)
	if err := CompareTable(c.Log, done, c.Target); err != nil {
		return err
	}
	werr := WriteRuns(out, report, done, Compared.TraceFile, c.TraceSteps)
	if werr == nil {
		fmt.Fprintf(c.Log, "wrote %s/report.json, a trace per schedule and plots\n", out.Path)
	}
	return stderrors.Join(trainErr, werr)
}
