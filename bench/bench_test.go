package bench

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunBenchInterleaves: the rounds run A B B A A B …, each run gets its
// kind and round, and the speed-up is the median of the rounds' ratios,
// with their range; different weights are reported, and a failure names
// the run.
func TestRunBenchInterleaves(t *testing.T) {
	speed := map[string][]float64{"placed": {300, 330, 310}, "one-cpu": {100, 150, 100}}
	var order []string
	b := Bench{Placed: "p", Against: "a"}
	err := b.RunBench(context.Background(), 3, func(_ context.Context, kind string, round int) (BenchRun, error) {
		order = append(order, kind)
		return BenchRun{SamplesPerSec: speed[kind][round], WeightsSHA256: "w"}, nil
	}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"placed", "one-cpu", "one-cpu", "placed", "placed", "one-cpu"}, order)
	require.Equal(t, 2, b.Runs[5].Round)
	require.Equal(t, 3.0, b.Speedup, "rounds 3, 2.2 and 3.1: the median")
	require.Equal(t, 2.2, b.SpeedupMin)
	require.Equal(t, 3.1, b.SpeedupMax)
	require.Equal(t, 310.0, b.PlacedSamplesPerSec)
	require.Equal(t, 100.0, b.AgainstSamplesPerSec)
	require.True(t, b.SameWeights)

	b = Bench{}
	err = b.RunBench(context.Background(), 1, func(_ context.Context, kind string, _ int) (BenchRun, error) {
		return BenchRun{SamplesPerSec: 1, WeightsSHA256: kind}, nil
	}, io.Discard)
	require.NoError(t, err)
	require.False(t, b.SameWeights, "a placement that changes the weights is reported")

	err = (&Bench{}).RunBench(context.Background(), 2, func(_ context.Context, kind string, round int) (BenchRun, error) {
		if round == 1 {
			return BenchRun{}, errors.New("boom")
		}
		return BenchRun{}, nil
	}, io.Discard)
	require.EqualError(t, err, "one-cpu run 1: boom")
}
