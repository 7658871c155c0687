package runout

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// Progress is how pipemare train and compare show a training as it runs:
// a line per epoch and a summary of the run on Log and, when Bar is set (a
// terminal), a progress bar per epoch on Bar.
type Progress struct {
	Log io.Writer
	// Bar, when set, receives a progress bar per epoch, updated every 5
	// steps, at most once every Throttle, and cleared when the epoch ends
	// or the run stops in it.
	Bar      io.Writer
	Throttle time.Duration
	// Steps, when set, is called after each update with the steps done in
	// the epoch.
	Steps func(done int)
}

// Train runs train.Train with cfg's progress reported as p says, and
// then, when an epoch trained, the summary: if it was interrupted, the
// epoch the run stopped in, or the last epoch it ended; the stages, the measured utilization and bubble
// and the wall time; and a finished run's accuracy and weights. It
// returns what train.Train returns; it is an experiment.Trainer.
func (p Progress) Train(ctx context.Context, build zoo.Builder, trainSet, test zoo.Data, cfg train.Config) (*train.Result, error) {
	var bar *progressbar.ProgressBar
	epoch := 1
	cfg.ProgressEvery = 5
	cfg.Steps = func(done, total int) {
		if p.Bar != nil && bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.Bar), progressbar.OptionSetDescription(fmt.Sprintf("epoch %d", epoch)),
				progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(p.Throttle))
		}
		if bar != nil {
			_ = bar.Set(done)
		}
		if p.Steps != nil {
			p.Steps(done)
		}
	}
	cfg.Progress = func(e train.EpochResult) {
		if bar != nil {
			_, bar = bar.Finish(), nil
		}
		epoch++
		fmt.Fprintf(p.Log, "epoch %d: loss %.4f, test accuracy %.4f, %.0f samples/s, utilization %.3f\n", e.Epoch, e.Loss, e.Accuracy, e.SamplesPerSec, e.Utilization)
	}
	res, err := train.Train(ctx, build, trainSet, test, cfg)
	if bar != nil { // an interrupted epoch: clear its bar before the summary
		_ = bar.Clear()
	}
	if res == nil || len(res.Epochs) == 0 {
		return res, err
	}
	switch last := res.Epochs[len(res.Epochs)-1]; {
	case last.Interrupted:
		fmt.Fprintf(p.Log, "epoch %d interrupted after %d steps: loss %.4f\n", last.Epoch, len(last.Losses), last.Loss)
	case res.Interrupted:
		fmt.Fprintf(p.Log, "run interrupted after epoch %d, at step %d\n", last.Epoch, res.Steps())
	}
	fmt.Fprintf(p.Log, "%d stages, measured utilization %.3f (bubble %.3f), wall %v\n", res.Stages, res.Report.Utilization, res.Report.Bubble, res.Wall.Round(time.Millisecond))
	switch {
	case res.WeightsSHA256 != "" && res.Interrupted:
		fmt.Fprintf(p.Log, "weights of the steps that ran (drained): weights_sha256 %s\n", res.WeightsSHA256)
	case res.WeightsSHA256 != "":
		fmt.Fprintf(p.Log, "trained model: test accuracy %.4f, weights_sha256 %s\n", res.ModelAccuracy, res.WeightsSHA256)
	}
	return res, err
}
