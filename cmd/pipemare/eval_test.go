package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"

	"github.com/stretchr/testify/require"
)

// TestEvalGivesTheRunsAccuracy: the model.safetensors a train run writes,
// loaded by pipemare eval into a freshly built model, has the run's
// weights_sha256 and exactly its model_test_accuracy, on the MLP and on
// the CNN (whose BatchNorm statistics travel in the file); -predictions
// writes one row per test example, right exactly as often as the accuracy
// says. Weights of another model are refused naming the file.
func TestEvalGivesTheRunsAccuracy(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("trainings (several seconds each under the race detector)")
	}
	cnn := []string{"-model", "cnn", "-limit", "256", "-epochs", "2", "-test-limit", "100"}
	weights := map[string]string{}
	for _, c := range []struct {
		model string
		args  []string
		tests int
	}{{"mlp", mlpArgs, 200}, {"cnn", cnn, 100}} {
		t.Run(c.model, func(t *testing.T) {
			if c.model == "cnn" && testing.Short() {
				t.Skip("a CNN training")
			}
			dir := t.TempDir()
			out := trainRun(t, append(c.args, "-out", dir)...)
			require.Contains(t, out, "wrote "+dir+"/report.json, model.safetensors,")
			want := reportOf(t, dir).Result
			weights[c.model] = filepath.Join(dir, rundir.ModelFile)
			preds := filepath.Join(dir, "predictions.csv")
			code, stdout, stderr := runCLI(context.Background(), "eval", "-model", c.model, "-weights", weights[c.model], "-test-limit", c.args[len(c.args)-1], "-predictions", preds)
			require.Equal(t, 0, code, stderr)
			var got train.Evaluation
			require.NoError(t, json.Unmarshal([]byte(stdout), &got))
			require.Equal(t, want.WeightsSHA256, got.WeightsSHA256, "eval loaded the weights the run trained")
			require.Equal(t, want.ModelAccuracy, got.TestAccuracy, "and measures the run's accuracy exactly")
			require.Equal(t, c.tests, got.TestExamples)

			f, err := os.Open(preds)
			require.NoError(t, err)
			defer f.Close()
			rows, err := csv.NewReader(f).ReadAll()
			require.NoError(t, err)
			require.Equal(t, []string{"example", "position", "target", "predicted"}, rows[0])
			require.Len(t, rows[1:], c.tests, "one prediction per test image")
			right := 0
			for _, r := range rows[1:] {
				if r[2] == r[3] {
					right++
				}
			}
			require.Equal(t, got.TestAccuracy, float64(right)/float64(c.tests))
		})
	}
	if w := weights["mlp"]; w != "" {
		code, _, stderr := runCLI(context.Background(), "eval", "-model", "resnet", "-weights", w)
		require.Equal(t, 1, code)
		first, _, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, w)
	}
}

// TestEvalChecksItsOutputsFirst: an output eval cannot write is an error
// naming its flag before any model is loaded or evaluated (here the
// weights do not even exist), and the check leaves nothing behind.
func TestEvalChecksItsOutputsFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none", rundir.ModelFile)
	for _, c := range []struct{ flag, path string }{
		{"-predictions", filepath.Join(dir, "no-such-dir", "p.csv")},
		{"-json", dir}, // a directory
	} {
		code, stdout, stderr := runCLI(context.Background(), "eval", "-model", "mlp", "-weights", missing, c.flag, c.path)
		require.Equal(t, 1, code, stderr)
		require.Empty(t, stdout)
		first, _, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, c.flag+" "+c.path+": cannot be written (nothing was evaluated)")
	}
	preds := filepath.Join(dir, "p.jsonl")
	code, _, stderr := runCLI(context.Background(), "eval", "-model", "mlp", "-weights", missing, "-predictions", preds)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, missing, "a writable output passes the check")
	require.NoFileExists(t, preds, "the check leaves nothing behind")
}
