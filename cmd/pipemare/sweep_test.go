package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/jsonkeys"
	"github.com/stretchr/testify/require"
)

// TestSweep runs a small sweep of the MLP (3 stages): two methods that run
// and one that cannot (PipeDream-2BW needs N ≥ 5), at two values of N and
// one injected delay, over two seeds. Each run lands in runs/ as it
// finishes; the table and sweep.json summarise them, mean and standard
// deviation included; each run is pipemare train with the flags it
// records, bit for bit; a rerun of the same command trains nothing and
// writes the same summary; a rerun with other flags into the same
// directory is refused, naming the file.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("ten small trainings")
	}
	dir := t.TempDir()
	args := []string{"sweep", "-model", "mlp", "-epochs", "2", "-limit", "192", "-methods", "sequential,pipemare,2bw",
		"-microbatches", "4,2", "-delays", "fixed:1", "-seeds", "1,2", "-target", "0.5", "-out", dir}
	code, out, stderr := runCLI(context.Background(), args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "3 methods × 3 settings × 2 seeds = 18 runs, 0 finished before, 18 to train, 1 at a time")
	require.Contains(t, out, "[18/18]")

	files, err := os.ReadDir(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	require.Len(t, files, 18, "a file per run, the refused ones too")
	var report sweepReport
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	require.Empty(t, jsonkeys.NotSnakeCase(keys))
	require.NoError(t, json.Unmarshal(b, &report))
	require.Equal(t, 3, report.Stages)
	require.Equal(t, []float64{2, 3, 1}, []float64{report.Settings[0].Tau0, report.Settings[1].Tau0, report.Settings[2].Tau0}, "τ_0 = ceil(5/N); the injected delay")
	require.Equal(t, 32, report.Settings[1].MicrobatchRows, "N=2 at the recipe's minibatch of 4 × 16")
	require.Len(t, report.Cells, 9)
	cell := map[string]sweepCell{}
	for _, c := range report.Cells {
		cell[c.Method+" "+c.Setting] = c
	}
	for _, name := range []string{"sequential N=4", "sequential N=2", "pipemare N=4", "pipemare N=2", "pipemare fixed:1"} {
		c := cell[name]
		require.Equal(t, []int64{1, 2}, c.Seeds, name)
		require.Empty(t, c.Refused, name)
		var runs [2]sweepRun
		for i, seed := range []string{"1", "2"} {
			b, err := os.ReadFile(filepath.Join(dir, "runs", strings.NewReplacer(" ", "-", "=", "", ":", "").Replace(name)+"-seed"+seed+".json"))
			require.NoError(t, err, name)
			require.NoError(t, json.Unmarshal(b, &runs[i]))
			require.Equal(t, runs[i].Accuracy, c.Accuracies[i], name)
			require.Equal(t, runs[i].Report.Result.Accuracy, runs[i].Accuracy, name)
		}
		a, b := runs[0].Accuracy, runs[1].Accuracy
		require.InDelta(t, (a+b)/2, c.Mean, 1e-12, name)
		require.InDelta(t, math.Abs(a-b)/math.Sqrt2, c.Std, 1e-12, "%s: the sample standard deviation", name)
		require.Len(t, c.EpochMean, 2, name)
		for e := range c.EpochMean {
			a, b := runs[0].Epochs[e], runs[1].Epochs[e]
			require.InDelta(t, (a+b)/2, c.EpochMean[e], 1e-12, "%s epoch %d", name, e+1)
			require.InDelta(t, math.Abs(a-b)/math.Sqrt2, c.EpochStd[e], 1e-12, "%s epoch %d", name, e+1)
		}
		require.Equal(t, c.Accuracies[1], runs[1].Epochs[1], "%s: the final accuracy is the last epoch's", name)
	}
	require.Contains(t, cell["2bw N=4"].Refused, "pipedream-2bw needs N ≥ 5 on 3 stages")
	require.Contains(t, cell["sequential fixed:1"].Refused, "injected delays stand for PipeMare's pipeline")
	md, err := os.ReadFile(filepath.Join(dir, "sweep.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| method | N=4 (τ₀ = 2) | N=2 (τ₀ = 3) | fixed:1 (τ₀ = 1) |")
	require.Contains(t, string(md), "| 2bw | n/a | n/a | n/a |")
	svg, err := os.ReadFile(filepath.Join(dir, "sweep.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	require.Contains(t, string(svg), "test accuracy after each epoch at N=2 (τ₀ = 3)", "the right panel is the largest pipeline delay")

	// Each run is pipemare train with its flags.
	var one sweepRun
	b, err = os.ReadFile(filepath.Join(dir, "runs", "pipemare-N2-seed2.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &one))
	trainDir := t.TempDir()
	code, _, stderr = runCLI(context.Background(), append(append([]string{"train"}, one.Args...), "-out", trainDir)...)
	require.Equal(t, 0, code, stderr)
	var trained struct {
		Result struct {
			Weights string `json:"weights_sha256"`
		} `json:"result"`
	}
	b, err = os.ReadFile(filepath.Join(trainDir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &trained))
	require.Equal(t, one.Report.Result.WeightsSHA256, trained.Result.Weights, "the sweep's run is train's, bit for bit")

	// A rerun trains nothing and writes the same summary.
	first, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	code, out, stderr = runCLI(context.Background(), args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "18 finished before, 0 to train")
	again, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	require.JSONEq(t, string(first), string(again))

	// Other flags into the same directory: refused before anything trains.
	code, _, stderr = runCLI(context.Background(), append(args, "-epochs", "3")...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "sequential-N4-seed1.json is a run of other flags")
}

// TestSweepBadValues: the list flags are checked before anything trains.
func TestSweepBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-methods", "pipemare,hogwild"}, `-methods: zoo: no method "hogwild"`},
		{[]string{"-microbatches", "5"}, "-microbatches: N=5 does not divide the recipe's minibatch of 64 rows (4 × 16)"},
		{[]string{"-microbatches", "0"}, `-microbatches "0": "0" is not a positive number`},
		{[]string{"-delays", "fixed:1.5"}, `neither fixed:D (D a positive integer) nor exp:μ`},
		{[]string{"-delays", "uniform:3"}, `neither fixed:D`},
		{[]string{"-microbatches", "", "-delays", ""}, "no setting"},
		{[]string{"-seeds", "one"}, `-seeds "one": "one" is not a number`},
		{[]string{"-limit", "-1"}, "-limit -1: must be positive"},
	} {
		code, stdout, stderr := runCLI(context.Background(), append([]string{"sweep", "-model", "mlp", "-out", t.TempDir()}, c.args...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, strings.SplitN(stderr, "\n", 2)[0], c.msg, "%v", c.args)
		require.Empty(t, stdout, "%v: nothing ran", c.args)
	}
}

func TestMeanStd(t *testing.T) {
	m, s := meanStd([]float64{0.8, 0.84, 0.82})
	require.InDelta(t, 0.82, m, 1e-12)
	require.InDelta(t, 0.02, s, 1e-12, "the sample standard deviation (n − 1)")
	m, s = meanStd([]float64{0.8})
	require.Equal(t, 0.8, m)
	require.Zero(t, s)
	m, s = meanStd(nil)
	require.Zero(t, m+s)
}
