package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/rundir"
)

// TestRunBenchInterleaves: the rounds run A B B A A B …, each run gets its
// kind and round and the probes before and after it, and the speed-up is
// the median of the rounds' ratios, with their range, and that of the
// rounds whose probes all held within probeMoved of the fastest;
// different weights are reported, and a failure names the run.
func TestRunBenchInterleaves(t *testing.T) {
	speed := map[string][]float64{"placed": {300, 330, 310}, "one-cpu": {100, 150, 100}}
	var order []string
	probes := []time.Duration{10, 10, 11, 10, 10, 12, 10, 10, 10, 10, 10, 10} // before and after each run: round 1's moved
	probed := 0
	b := Bench{Placed: "p", Against: "a", probe: func() time.Duration { probed++; return probes[probed-1] * time.Millisecond }}
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
	for i, r := range b.Runs {
		require.Equal(t, (probes[2*i] * time.Millisecond).Nanoseconds(), r.ProbeNs, "run %d: the probe just before it", i)
		require.Equal(t, (probes[2*i+1] * time.Millisecond).Nanoseconds(), r.ProbeAfterNs, "run %d: the probe just after it", i)
	}
	require.InDelta(t, 1.2, b.ProbeSpread, 1e-12, "the slowest probe over the fastest")
	require.Equal(t, 2, b.SteadyRounds, "round 1's probe after its one-CPU run moved by 1.2×")
	require.Equal(t, 3.05, b.SteadySpeedup, "rounds 3 and 3.1")
	require.Equal(t, 3.0, b.SteadySpeedupMin)
	require.Equal(t, 3.1, b.SteadySpeedupMax)

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

// TestWriteSaysTheMachineMoved: a bench whose probes spread by more than
// probeMoved says that the machine's speed moved, and bench.json keeps the
// spread; one whose probes agree says nothing of it.
func TestWriteSaysTheMachineMoved(t *testing.T) {
	for _, c := range []struct {
		spread float64
		said   bool
	}{{1.25, true}, {1.05, false}} {
		b := Bench{Placed: "p", Against: "a", Speedup: 1.5, SameWeights: true, ProbeSpread: c.spread,
			Runs: make([]BenchRun, 6), SteadyRounds: 2, SteadySpeedup: 1.75, SteadySpeedupMin: 1.7, SteadySpeedupMax: 1.8}
		var log strings.Builder
		dir := rundir.Dir{Path: t.TempDir(), Files: []string{"bench.json", "report.json"}}
		require.NoError(t, b.Write(dir, []byte(`{}`), &log))
		require.Equal(t, c.said, strings.Contains(log.String(), "the machine's speed moved during this bench: a fixed loop took up to 1.25× its fastest"), "spread %g: %s", c.spread, log.String())
		require.Equal(t, c.said, strings.Contains(log.String(), "speed-up 1.75× (1.70–1.80) over the 2 of 3 rounds whose probes all held within 10% of the fastest"), "spread %g: %s", c.spread, log.String())
		raw, err := os.ReadFile(filepath.Join(dir.Path, "bench.json"))
		require.NoError(t, err)
		var back Bench
		require.NoError(t, json.Unmarshal(raw, &back))
		require.Equal(t, c.spread, back.ProbeSpread)
		require.Equal(t, 1.75, back.SteadySpeedup)
	}
	b := Bench{Placed: "p", Against: "a", SameWeights: true, ProbeSpread: 1.5, Runs: make([]BenchRun, 2)}
	var log strings.Builder
	require.NoError(t, b.Write(rundir.Dir{Path: t.TempDir(), Files: []string{"bench.json", "report.json"}}, []byte(`{}`), &log))
	require.Contains(t, log.String(), "no round's probes all held within 10% of the fastest: measure again")
}

// TestProbeTakesTime: the probe runs its loop (a compiler that dropped it
// would return at once) and says how long it took.
func TestProbeTakesTime(t *testing.T) {
	require.Greater(t, Probe(), 100*time.Microsecond)
}
