package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/experiment"
	"github.com/stretchr/testify/require"
)

// TestSweep runs a small sweep of the MLP (3 stages) from the command
// line: a variant with parameters, the baseline and a method that cannot
// run (PipeDream-2BW needs N ≥ 5), at two values of N and one injected
// delay, two lengths, one seed, with checkpoints. Each run lands in the
// run cache; each is pipemare train with the flags it records, bit for
// bit; a rerun trains nothing and writes the same summary; other flags into
// the same cache are refused, naming the file.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("a dozen small trainings")
	}
	dir := t.TempDir()
	args := []string{"sweep", "-model", "mlp", "-epochs", "1,2", "-limit", "192", "-methods", "sequential,pipemare(warmup=0.2,t1=0.5,decay=step),2bw",
		"-microbatches", "4,2", "-delays", "fixed:1", "-seeds", "1", "-checkpoint-every", "2", "-target", "0.5", "-jobs", "2", "-out", dir}
	code, out, stderr := runCLI(context.Background(), args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "3 variants × 3 settings × 2 lengths × 1 seeds = 18 runs, 0 finished before, 18 to train, 2 at a time")
	require.Contains(t, out, "[18/18]")
	files, err := os.ReadDir(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	require.Len(t, files, 18, "a record per run, the refused ones too")
	var rep experiment.Report
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, 3, rep.Stages)
	require.Equal(t, []float64{2, 3, 1}, []float64{rep.Settings[0].Tau0, rep.Settings[1].Tau0, rep.Settings[2].Tau0})
	md, err := os.ReadFile(filepath.Join(dir, "sweep.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## N=2 (τ₀ = 3)")
	require.Contains(t, string(md), "| 2bw | n/a | n/a |")
	require.Contains(t, string(md), "pipedream-2bw needs N ≥ 5 on 3 stages")

	// A run is pipemare train with its flags.
	var one experiment.Record
	b, err = os.ReadFile(filepath.Join(dir, "runs", "pipemare_warmup=0.2_t1=0.5_decay=step-N2-e2-seed1.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &one))
	require.Equal(t, []int{1, 3}, []int{*one.Spec.Warmup, *one.Spec.T1}, "6 steps: a fifth of them the warm-up, K half of the other 5, rounded")
	require.True(t, one.Spec.StepDecay)
	require.Equal(t, 2, one.CheckpointEvery)
	trainDir := t.TempDir()
	code, _, stderr = runCLI(context.Background(), append(append([]string{"train"}, specArgs(one.Spec)...), "-checkpoint-every=2", "-out", trainDir)...)
	require.Equal(t, 0, code, stderr)
	var trained struct {
		Result struct {
			Weights  string  `json:"weights_sha256"`
			Accuracy float64 `json:"model_test_accuracy"`
		} `json:"result"`
	}
	b, err = os.ReadFile(filepath.Join(trainDir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &trained))
	require.Equal(t, one.WeightsSHA256, trained.Result.Weights, "the sweep's run is train's, bit for bit")
	require.Equal(t, one.Accuracy, trained.Result.Accuracy)

	// A rerun trains nothing and writes the same summary.
	first, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	code, out, stderr = runCLI(context.Background(), args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "18 finished before, 0 to train")
	again, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	require.NoError(t, err)
	require.JSONEq(t, string(first), string(again))

	// Other flags into the same cache: refused before anything trains.
	code, _, stderr = runCLI(context.Background(), append(args, "-checkpoint-every", "3")...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "sequential-N4-e1-seed1.json is another run: -checkpoint-every (checkpoint_every) 2 there, 3 here; give another cache directory, or delete it")
}

// TestSweepBadValues: the list flags are checked before anything trains.
func TestSweepBadValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-methods", "sequential,hogwild"}, `-methods: train: no method "hogwild"`},
		{[]string{"-methods", "sequential,spike(t3=1)"}, `no parameter "t3"`},
		{[]string{"-methods", "pipemare"}, "-methods: the baseline sequential (-baseline) is not among them"},
		{[]string{"-microbatches", "5"}, "-microbatches: microbatches: N=5 does not divide the recipe's minibatch of 64 rows (4 × 16)"},
		{[]string{"-microbatches", "0"}, `"0" is not a positive number`},
		{[]string{"-delays", "fixed:1.5"}, `neither fixed:D (D a positive integer) nor exp:μ`},
		{[]string{"-microbatches", "", "-delays", ""}, "no setting"},
		{[]string{"-epochs", "2,x"}, `-epochs "2,x": "x" is not a number of epochs`},
		{[]string{"-seeds", "one"}, `-seeds "one": "one" is not a number`},
		{[]string{"-checkpoint-every", "-1"}, "-checkpoint-every -1"},
		{[]string{"-limit", "-1"}, "-limit -1: must be positive"},
	} {
		code, stdout, stderr := runCLI(context.Background(), append([]string{"sweep", "-model", "mlp", "-methods", "sequential", "-out", t.TempDir()}, c.args...)...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Contains(t, strings.SplitN(stderr, "\n", 2)[0], c.msg, "%v", c.args)
		require.Empty(t, stdout, "%v: nothing ran", c.args)
	}
}
