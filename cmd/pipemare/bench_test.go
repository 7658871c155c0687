package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/bench"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/stretchr/testify/require"
)

// benchRunArgs is the benchmarks' run of every model: cut into 2 stages
// balanced by measuring, PipeMare at the recipe's N with T1 and T2, 20
// synchronous warm-up minibatches, then the asynchronous rest.
var benchRunArgs = []string{"-stages", "2", "-limit", "4000", "-epochs", "2", "-warmup", "20", "-test-limit", "100"}

// BenchmarkPlacement runs pipemare bench, one round (the placed run and
// the one-CPU run), for the MLP, the CNN and the ResNet, with the stages
// in this process on every CPU and in 2 stage processes each pinned to a
// CPU, and reports the speed-up over one CPU and both runs' samples/s
// (over the time the pipeline trained). Repeat it, interleaved, and take
// medians (bench's own -rounds does the same for one placement):
//
//	go test -c -o pipemare.test ./cmd/pipemare/
//	for i in 1 2 3; do ./pipemare.test -test.run '^$' -test.bench Placement -test.benchtime 1x; done
func BenchmarkPlacement(b *testing.B) {
	b.Setenv(asMainEnv, "1") // bench's trainings are this test binary
	for _, model := range []string{"mlp", "cnn", "resnet"} {
		for _, p := range []struct {
			name  string
			flags []string
		}{{"in-process", nil}, {"procs=2-pinned", []string{"-procs", "2", "-pin"}}} {
			b.Run(model+"/"+p.name, func(b *testing.B) {
				for range b.N {
					dir := b.TempDir()
					args := append(append([]string{"bench", "-model", model, "-rounds", "1", "-out", dir}, benchRunArgs...), p.flags...)
					code, out, stderr := runCLI(context.Background(), args...)
					require.Equal(b, 0, code, "%s\n%s", out, stderr)
					raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
					require.NoError(b, err)
					var r bench.Bench
					require.NoError(b, json.Unmarshal(raw, &r))
					require.True(b, r.SameWeights)
					b.ReportMetric(r.Speedup, "speedup")
					b.ReportMetric(r.PlacedSamplesPerSec, "placed-samples/s")
					b.ReportMetric(r.AgainstSamplesPerSec, "one-cpu-samples/s")
				}
			})
		}
	}
}

// TestBench: pipemare bench trains the placed run and the one-CPU run to
// the same weights, writes bench.json with the runs in A B order, and the
// placed run's report with the speed-up beside it; it refuses flags that
// would place the runs elsewhere.
func TestBench(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1")
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), append([]string{"bench", "-rounds", "1", "-out", dir, "-stages", "2"}, mlpArgs...)...)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	require.Regexp(t, `speed-up \d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d over the rounds\)`, out)
	raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	require.NoError(t, err)
	var r bench.Bench
	require.NoError(t, json.Unmarshal(raw, &r))
	require.True(t, r.SameWeights, "placement changes timing, never weights")
	require.Len(t, r.Runs, 2)
	require.Equal(t, []string{"placed", "one-cpu"}, []string{r.Runs[0].Kind, r.Runs[1].Kind})
	require.InDelta(t, r.Runs[0].SamplesPerSec/r.Runs[1].SamplesPerSec, r.Speedup, 1e-9)
	var rep map[string]any
	raw, err = os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	require.Contains(t, rep, "speedup")
	require.Contains(t, rep, "result")
	allowed, err := affinity.Allowed()
	require.NoError(t, err)
	require.Equal(t, affinity.Format(allowed[len(allowed)-1:]), reportOf(t, r.Runs[1].Dir).Placement.DriverCPUs, "the one-CPU run is pinned to the last CPU")

	for _, bad := range [][]string{{"-resume", dir}, {"-cpus", "0"}, {"-rounds", "0"},
		{"-against", "gpu"}, {"-against", "cores"}, {"-against", "cores", "-target", "0.5"}} {
		code, _, stderr := runCLI(context.Background(), append([]string{"bench", "-out", t.TempDir()}, bad...)...)
		require.Equal(t, 2, code, "%v: %s", bad, stderr)
		require.Contains(t, stderr, "-"+strings.TrimPrefix(bad[0], "-"), "%v: the error names the flag", bad)
	}
}

// TestBenchAgainstCores: pipemare bench -procs 2 -against cores trains the
// stage processes and one process on every CPU, in A B order, to the same
// weights, and names the other runs by their placement.
func TestBenchAgainstCores(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1")
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), append([]string{"bench", "-rounds", "1", "-out", dir, "-stages", "2", "-procs", "2", "-against", "cores"}, mlpArgs...)...)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	require.NoError(t, err)
	var r bench.Bench
	require.NoError(t, json.Unmarshal(raw, &r))
	require.True(t, r.SameWeights, "placement changes timing, never weights")
	require.Equal(t, []string{"placed", "cores"}, []string{r.Runs[0].Kind, r.Runs[1].Kind})
	require.Equal(t, filepath.Join(dir, "cores-0"), r.Runs[1].Dir)
	require.Equal(t, "processes", reportOf(t, r.Runs[0].Dir).Placement.Where)
	other := reportOf(t, r.Runs[1].Dir).Placement
	require.Equal(t, "in-process", other.Where)
	require.Empty(t, other.DriverCPUs, "one process on every CPU: not pinned")
	require.Contains(t, out, "against one process on")
}

// TestBenchTarget: pipemare bench -target trains each seed in each
// placement (two seeds from -seed on, the order reversed for the second),
// each seed to the same weights everywhere, and writes bench.json with
// each run's epochs and time to the target and each placement's summary,
// and the table; it refuses a placement it does not know and -procs.
func TestBenchTarget(t *testing.T) {
	skipProcesses(t)
	t.Setenv(asMainEnv, "1")
	dir := t.TempDir()
	code, out, stderr := runCLI(context.Background(), append([]string{"bench", "-target", "0.3", "-placements", "one-cpu,cores",
		"-rounds", "2", "-seed", "5", "-out", dir, "-stages", "2"}, mlpArgs...)...)
	require.Equal(t, 0, code, "%s\n%s", out, stderr)
	require.Contains(t, out, "| placement | reached 0.3000 | time to target, s | epochs | samples/s |")
	raw, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	require.NoError(t, err)
	var r bench.TimeToAccuracy
	require.NoError(t, json.Unmarshal(raw, &r))
	require.True(t, r.SameWeights, "placement changes timing, never weights")
	require.Len(t, r.Runs, 4)
	var order []string
	for _, run := range r.Runs {
		order = append(order, fmt.Sprintf("%s/%d", run.Placement, run.Seed))
		require.True(t, run.Reached, "%s seed %d: %v", run.Placement, run.Seed, run.Accuracies)
		require.Len(t, run.Clocks, 3, "every epoch's clock")
		require.Equal(t, run.Clocks[run.EpochsToTarget-1], run.SecondsToTarget)
		rep := reportOf(t, run.Dir)
		require.Equal(t, rep.Result.Accuracy, run.Accuracies[2])
		require.EqualValues(t, run.Seed, rep.Settings["seed"], "the run trained with its seed")
	}
	require.Equal(t, []string{"one-cpu/5", "cores/5", "cores/6", "one-cpu/6"}, order)
	require.NotEqual(t, r.Runs[0].WeightsSHA256, r.Runs[3].WeightsSHA256, "two seeds")
	require.Equal(t, []string{"one-cpu", "cores"}, []string{r.Placements[0].Placement, r.Placements[1].Placement})

	for _, bad := range [][]string{{"-placements", "gpu"}, {"-procs", "2"}, {"-target", "2"}} {
		code, _, stderr := runCLI(context.Background(), append(append([]string{"bench", "-target", "0.5", "-stages", "2", "-out", t.TempDir()}, mlpArgs...), bad...)...)
		require.Equal(t, 2, code, "%v: %s", bad, stderr)
	}
}

// TestBenchArgs: both runs are pipemare train with the flags given but
// bench's own and the placement's, and the cut fixed; the placed run adds
// its stage processes, the other its CPU.
func TestBenchArgs(t *testing.T) {
	given := []string{"-limit=640", "-model=mlp", "-out=o", "-pin=true", "-procs=2", "-rounds=3", "-stages=2", "-trace-steps=5", "-transport=grpc"}
	placed, against := benchArgs(given, []int{3, 7}, 2, true, bench.TargetPlacement{Name: "one-cpu", CPUs: "5"})
	base := []string{"train", "-trace-steps=1", "-limit=640", "-model=mlp", "-trace-steps=5", "-cut=3,7"}
	require.Equal(t, append(base[:len(base):len(base)], "-procs=2", "-insecure", "-pin", "-transport=grpc"), placed, "the transport is the placed run's")
	require.Equal(t, append(base[:len(base):len(base)], "-cpus=5"), against)

	placed, against = benchArgs([]string{"-model=mlp"}, nil, 0, false, bench.TargetPlacement{Name: "one-cpu", CPUs: "0-1"})
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=mlp"}, placed)
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=mlp", "-cpus=0-1"}, against)

	_, against = benchArgs([]string{"-model=mlp", "-procs=2", "-against=cores"}, []int{6}, 2, false, bench.TargetPlacement{Name: "cores"})
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=mlp", "-cut=6"}, against, "-against cores: one process on every CPU, the placed run's cut")
}

// TestTargetArgs: the trainings get the flags given but bench's own, the
// placement's and the seed; the cut replaces -stages and a -cut given, and
// one stage, which has no cut, keeps its -stages.
func TestTargetArgs(t *testing.T) {
	given := []string{"-model=cnn", "-stages=2", "-seed=3", "-target=0.8", "-placements=cores", "-rounds=2", "-out=o", "-epochs=1"}
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=cnn", "-epochs=1", "-cut=7"}, targetArgs(given, []int{7}))
	given[1] = "-stages=1"
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=cnn", "-stages=1", "-epochs=1"}, targetArgs(given, nil))
	given[1] = "-cut=9"
	require.Equal(t, []string{"train", "-trace-steps=1", "-model=cnn", "-epochs=1", "-cut=9"}, targetArgs(given, []int{9}), "one -cut")
	require.Equal(t, []string{"train", "-procs=3", "-insecure", "-pin"}, placedArgs([]string{"train"}, bench.TargetPlacement{Procs: 3, Pin: true}))
}
