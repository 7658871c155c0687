package runout

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// TestProgress: a line per epoch and the summary on the log, a bar on Bar
// only, cleared when the run is interrupted in an epoch, which the
// summary names.
func TestProgress(t *testing.T) {
	trainSet, test := smallData(t)
	cfg := smallConfig(schedule.PipeMare())
	cfg.Epochs = 2
	var log, bar strings.Builder
	steps := 0
	res, err := Progress{Log: &log, Steps: func(int) { steps++ }}.Train(context.Background(), zoo.MLP, trainSet, test, cfg)
	require.NoError(t, err)
	require.Positive(t, steps)
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	require.Len(t, lines, 4, log.String())
	require.Regexp(t, `^epoch 1: loss [0-9.]+, test accuracy [0-9.]+, \d+ samples/s, utilization [0-9.]+$`, lines[0])
	require.Regexp(t, `^epoch 2: `, lines[1])
	require.Regexp(t, `^3 stages, measured utilization [0-9.]+ \(bubble [0-9.]+\), wall `, lines[2])
	require.Equal(t, "trained model: test accuracy "+strings.Fields(lines[3])[4]+" weights_sha256 "+res.WeightsSHA256, lines[3])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log.Reset()
	res, err = Progress{Log: &log, Bar: &bar, Steps: func(done int) {
		if done >= 5 {
			cancel()
		}
	}}.Train(ctx, zoo.MLP, trainSet, test, cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, res.Epochs[0].Interrupted)
	require.Regexp(t, `^epoch 1 interrupted after \d+ steps: loss [0-9.]+\n3 stages, measured utilization `, log.String())
	require.NotContains(t, log.String(), "trained model")
	require.Contains(t, bar.String(), "epoch 1")
	require.True(t, strings.HasSuffix(bar.String(), "\r"), "the bar is cleared: %q", bar.String())
}
