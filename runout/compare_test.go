package runout

import (
	"testing"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestCompareRuns: every schedule once, PipeMare naive and with the
// techniques the settings turn on, the weight-stashing schedules without
// them, the schedules that need more microbatches left out, and those that
// place several stages on a worker not compared.
func TestCompareRuns(t *testing.T) {
	base := train.Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03}, T1: 10, T2: 0.9, Warmup: 5}
	runs, left, err := CompareRuns(func(s schedule.Schedule) (train.Config, error) {
		c := base
		c.Schedule = s
		return c, nil
	}, 3)
	require.NoError(t, err)
	var labels []string
	for _, r := range runs {
		labels = append(labels, r.Label)
		if r.Config.Schedule.StashWeights || r.Label == "pipemare (naive)" {
			require.Zero(t, r.Config.T1+r.Config.Warmup, r.Label)
			require.Zero(t, r.Config.T2, r.Label)
		}
	}
	require.Equal(t, []string{"sequential", "gpipe", "1f1b", "zb-h1", "zb-h2", "pipedream", "pipemare (naive)", "pipemare +T1+T2+W"}, labels)
	require.Len(t, left, 1)
	require.Equal(t, "pipedream-2bw", left[0].Label, "it needs N ≥ 2P−1 = 5")
	require.Equal(t, "trace-pipemare-t1t2w.json", runs[7].TraceFile())
}
