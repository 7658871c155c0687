package train

import (
	"context"
	"testing"
	"time"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestUtilizationOfTwoTestSets: the same training (the same weights)
// measured with a test set of 64 examples and with the whole embedded one
// records the evaluations' time apart (evaluation_ns), and every epoch
// has a utilization, the warm-up's included. That the utilization leaves
// the evaluations out exactly is asyncvm's
// TestUtilizationLeavesOutPauses; the two runs' utilizations, logged
// here, differ only by the noise of timing two runs (docs/speed.md).
func TestUtilizationOfTwoTestSets(t *testing.T) {
	trainSet, test, err := testFashion()
	require.NoError(t, err)
	run := func(testLimit int) *Result {
		cfg := Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 3, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare(), Warmup: 12}
		res, err := Train(context.Background(), zoo.MLP, trainSet.Head(768), test.Head(testLimit), cfg)
		require.NoError(t, err)
		return res
	}
	small, full := run(64), run(test.Len())
	require.Equal(t, small.WeightsSHA256, full.WeightsSHA256, "the same training")
	t.Logf("utilization %.4f with 64 test examples, %.4f with %d", small.Report.Utilization, full.Report.Utilization, test.Len())
	for _, res := range []*Result{small, full} {
		require.Len(t, res.Epochs, 3)
		for _, e := range res.Epochs { // the first epoch is the warm-up
			require.Positive(t, e.Utilization, "epoch %d", e.Epoch)
			require.LessOrEqual(t, e.Utilization, 1.0, "epoch %d", e.Epoch)
		}
		require.Positive(t, res.Evaluation)
		require.Less(t, res.Evaluation, res.Wall)
		require.Contains(t, jsonOf(t, res), "evaluation_ns")
		var clock time.Duration
		for _, e := range res.Epochs { // the clock runs through training and evaluation
			require.Greater(t, e.Clock, clock+e.Wall, "epoch %d: its clock passes its training and its evaluation", e.Epoch)
			clock = e.Clock
		}
		require.LessOrEqual(t, clock, res.Wall)
		require.Contains(t, jsonOf(t, res)["epochs"].([]any)[0], "clock_ns")
	}
	require.Greater(t, full.Evaluation, small.Evaluation, "%d test examples take longer than 64", test.Len())
	require.Greater(t, untrained(full), untrained(small), "the clock counts evaluation: %d test examples take longer than 64", test.Len())
}

// untrained is the time of res's epoch clock not spent training.
func untrained(res *Result) time.Duration {
	d := res.Epochs[len(res.Epochs)-1].Clock
	for _, e := range res.Epochs {
		d -= e.Wall
	}
	return d
}
