package runout

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// TestInterruptedAtEpochBoundary: a run interrupted as epoch 1's last step
// ends — epoch 1 then ends whole, epoch 2 never begins — says so: the
// progress names the last epoch it ended and the step, not an interrupted
// epoch, and so does the interruption, with the model of those steps.
func TestInterruptedAtEpochBoundary(t *testing.T) {
	trainSet, test := smallData(t)
	cfg := smallConfig(schedule.PipeMare()) // 10 steps an epoch
	cfg.Epochs = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	res, err := Progress{Log: &out, Steps: func(done int) {
		if done == 10 {
			cancel()
		}
	}}.Train(ctx, zoo.MLP, trainSet, test, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, res.Epochs, 1, "epoch 2 never began")
	log := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, log, 4, "%q", log)
	require.Regexp(t, `^epoch 1: loss [0-9.]+, test accuracy [0-9.]+, `, log[0])
	require.Equal(t, "run interrupted after epoch 1, at step 10", log[1])
	require.Regexp(t, `^3 stages, measured utilization `, log[2])
	require.Equal(t, "weights of the steps that ran (drained): weights_sha256 "+res.WeightsSHA256, log[3])

	dir := t.TempDir()
	err = (&TrainRun{Dir: rundir.Dir{Path: dir}}).Interruption(res)
	require.EqualError(t, err, "interrupted after epoch 1, at step 10; "+rundir.ModelFile+" (the weights of the steps that ran), report.json, trace.json and the plots written to "+dir+"; no checkpoint to resume from (checkpoint_every K makes a run resumable)")
	res.Epochs[0].Interrupted = true // stopped inside it, as far as the record goes
	require.ErrorContains(t, (&TrainRun{Dir: rundir.Dir{Path: dir}}).Interruption(res), "interrupted in epoch 1 after step 10; ")
}
