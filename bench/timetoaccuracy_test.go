package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/pipemare/pipemare/rundir"
	"github.com/stretchr/testify/require"
)

// targetReport is a report.json of a run whose epochs reached accuracies
// acc at clocks (seconds).
func targetReport(t *testing.T, acc, clocks []float64, sps float64, weights string) []byte {
	t.Helper()
	var epochs []map[string]any
	for i := range acc {
		epochs = append(epochs, map[string]any{"epoch": i + 1, "test_accuracy": acc[i], "clock_ns": int64(clocks[i] * 1e9)})
	}
	raw, err := json.Marshal(map[string]any{"result": map[string]any{
		"epochs": epochs, "weights_sha256": weights, "report": map[string]any{"samples_per_sec": sps},
	}})
	require.NoError(t, err)
	return raw
}

// TestTimeToAccuracy: every seed trains in every placement, the order
// reversed from one seed to the next; a run's time to the target is the
// clock of its first epoch at or above it; each placement's summary is
// the median over the runs that reached it, with its range; a run that
// never reaches it counts apart; different weights for one seed are
// reported; a failure names the placement and the seed.
func TestTimeToAccuracy(t *testing.T) {
	ps, err := TargetPlacements([]string{"one-cpu", "cores", "procs"}, 2, "1")
	require.NoError(t, err)
	require.Equal(t, []TargetPlacement{{Name: "one-cpu", CPUs: "1"}, {Name: "cores"}, {Name: "procs", Procs: 2, Pin: true}}, ps)

	// clocks per placement: one-cpu is slowest; seed 3 of cores never
	// reaches 0.85.
	clocks := map[string][]float64{"one-cpu": {10, 20, 30}, "cores": {5, 10, 15}, "procs": {7, 14, 21}}
	acc := map[int64][]float64{1: {0.80, 0.85, 0.86}, 2: {0.84, 0.849, 0.87}, 3: {0.85, 0.86, 0.9}}
	var order []string
	tta := TimeToAccuracy{Target: 0.85}
	err = tta.Run(context.Background(), []int64{1, 2, 3}, ps, func(_ context.Context, p TargetPlacement, seed int64) ([]byte, string, error) {
		order = append(order, fmt.Sprintf("%s/%d", p.Name, seed))
		a := acc[seed]
		if p.Name == "cores" && seed == 3 {
			a = []float64{0.5, 0.6, 0.7}
		}
		return targetReport(t, a, clocks[p.Name], 1000*clocks["one-cpu"][0]/clocks[p.Name][0]+float64(seed), "w"), "d", nil
	}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"one-cpu/1", "cores/1", "procs/1", "procs/2", "cores/2", "one-cpu/2", "one-cpu/3", "cores/3", "procs/3"}, order)

	r := tta.Runs[0]
	require.True(t, r.Reached)
	require.Equal(t, 2, r.EpochsToTarget, "0.85 at the second epoch")
	require.Equal(t, 20.0, r.SecondsToTarget)
	require.Equal(t, []float64{10, 20, 30}, r.Clocks)
	require.Equal(t, 3, tta.Runs[5].EpochsToTarget, "0.849 is below 0.85")
	require.False(t, tta.Runs[7].Reached)

	require.Equal(t, "one-cpu", tta.Placements[0].Placement)
	require.Equal(t, TargetSummary{Placement: "one-cpu", Runs: 3, Reached: 3, SecondsToTarget: 20, SecondsMin: 10, SecondsMax: 30,
		EpochsToTarget: 2, SamplesPerSec: 1002, SamplesPerSecMin: 1001, SamplesPerSecMax: 1003}, tta.Placements[0])
	cores := tta.Placements[1]
	require.Equal(t, 2, cores.Reached)
	require.Equal(t, 12.5, cores.SecondsToTarget, "the median of 10 and 15: the run that did not reach it is left out")
	require.True(t, tta.SameWeights)

	var table bytes.Buffer
	tta.Table(&table)
	require.Contains(t, table.String(), "| cores | 2 of 3 | 12.50 (10.00–15.00) | 2.5 |")

	tta = TimeToAccuracy{Target: 0.5}
	require.NoError(t, tta.Run(context.Background(), []int64{1}, ps, func(_ context.Context, p TargetPlacement, _ int64) ([]byte, string, error) {
		return targetReport(t, []float64{0.6}, []float64{1}, 1, p.Name), "d", nil
	}, io.Discard))
	require.False(t, tta.SameWeights, "a placement that changes the weights is reported")
	out := rundir.Dir{Path: t.TempDir(), Files: []string{"bench.json"}}
	require.ErrorContains(t, tta.Write(out, io.Discard), "different weights")
	require.FileExists(t, filepath.Join(out.Path, "bench.json"), "written all the same")

	err = (&TimeToAccuracy{}).Run(context.Background(), []int64{7}, ps, func(_ context.Context, p TargetPlacement, _ int64) ([]byte, string, error) {
		if p.Name == "cores" {
			return nil, "", errors.New("boom")
		}
		return targetReport(t, []float64{0.6}, []float64{1}, 1, "w"), "d", nil
	}, io.Discard)
	require.EqualError(t, err, "cores, seed 7: boom")

	_, err = TargetPlacements([]string{"procs"}, 1, "1")
	require.ErrorContains(t, err, "stages 2 or more")
	_, err = TargetPlacements([]string{"gpu"}, 2, "1")
	require.ErrorContains(t, err, `placements "gpu": not one of one-cpu, cores, procs`)
}
