package train

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// TestInterruptedAtEpochBoundary: a run cancelled at an epoch's end — as
// its last step's loss arrives, or once its progress is reported — records
// what ran and nothing else: every step that ran belongs to an epoch of
// the result, the epoch whose steps all ran is complete (its accuracy is
// measured: what was read finishes), the epoch that had not begun is not
// reported, and the run is interrupted with the drained weights' hash; a
// checkpoint at that epoch's end is written. Cancelled as the last
// epoch's last loss arrives, the run finishes.
func TestInterruptedAtEpochBoundary(t *testing.T) {
	trainSet, test, err := testFashion()
	require.NoError(t, err)
	for _, c := range []struct {
		name     string
		atStep   int // cancel as this step's loss arrives (steps into the run)
		atEpoch  int // or once this epoch's progress is reported
		finished bool
		every    int // checkpoints
	}{
		{name: "last step of epoch 1", atStep: 3, every: 3},
		{name: "after epoch 1's progress", atEpoch: 1},
		{name: "last step of the run", atStep: 6, finished: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			steps := 0
			cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), T1: 6, T2: 0.9, ProgressEvery: 1}
			if c.every > 0 {
				cfg.CheckpointEvery, cfg.CheckpointDir = c.every, t.TempDir()
			}
			cfg.Steps = func(int, int) {
				if steps++; steps == c.atStep {
					cancel()
				}
			}
			cfg.Progress = func(e EpochResult) {
				if e.Epoch == c.atEpoch {
					cancel()
				}
			}
			res, err := Train(ctx, zoo.MLP, trainSet.Head(192), test.Head(64), cfg) // 3 steps an epoch
			require.NotNil(t, res)
			require.Equal(t, steps, res.Steps(), "every step that ran, in the epochs of the result")
			for _, e := range res.Epochs {
				require.False(t, e.Interrupted, "epoch %d: all its steps ran", e.Epoch)
				require.Len(t, e.Losses, 3)
				require.Positive(t, e.Accuracy, "epoch %d's accuracy", e.Epoch)
			}
			want, herr := res.Plan.WeightsSHA256()
			require.NoError(t, herr)
			require.Equal(t, want, res.WeightsSHA256, "the drained weights' hash")
			if c.finished {
				require.NoError(t, err)
				require.Len(t, res.Epochs, 2)
				require.False(t, res.Interrupted)
				require.Positive(t, res.ModelAccuracy)
				return
			}
			require.ErrorIs(t, err, context.Canceled)
			require.Len(t, res.Epochs, 1, "epoch 2 had not begun")
			require.True(t, res.Interrupted)
			require.Equal(t, res.Epochs[0].Accuracy, res.Accuracy)
			require.Zero(t, res.ModelAccuracy)
			if c.every > 0 {
				_, step, err := lastCheckpoint(cfg.CheckpointDir)
				require.NoError(t, err)
				require.Equal(t, 3, step, "the checkpoint at epoch 1's end")
			}
			doc := jsonOf(t, res)
			require.Equal(t, true, doc["interrupted"])
			require.Contains(t, doc, "final_accuracy")
		})
	}
}
