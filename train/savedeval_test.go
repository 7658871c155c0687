package train_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// TestSavedEval: a model file evaluated on the test examples, the
// Evaluation written to the writer or to the JSON file, and the
// predictions, one per example, to theirs; a file that is not the model's
// writes nothing.
func TestSavedEval(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	m, err := r.Build(r.Run.Microbatch, 1)
	require.NoError(t, err)
	dir := t.TempDir()
	weights := filepath.Join(dir, "model"+checkpoint.ModelExt)
	require.NoError(t, checkpoint.SaveModel(weights, m.Learnables))
	_, test, err := zoo.LoadFashionMNIST("embedded")
	require.NoError(t, err)
	test = test.Head(50)

	var b strings.Builder
	require.NoError(t, train.SavedEval{Weights: weights, Data: "embedded"}.Run(&b, r, test))
	var ev train.Evaluation
	require.NoError(t, json.Unmarshal([]byte(b.String()), &ev))
	require.True(t, strings.HasSuffix(b.String(), "}\n"))
	require.Equal(t, train.Evaluation{Model: "mlp", Weights: weights, WeightsSHA256: ev.WeightsSHA256, Data: "embedded", TestExamples: 50, TestAccuracy: ev.TestAccuracy}, ev)
	require.NotEmpty(t, ev.WeightsSHA256)

	preds, out := filepath.Join(dir, "p.csv"), filepath.Join(dir, "eval.json")
	b.Reset()
	require.NoError(t, train.SavedEval{Weights: weights, Rows: 10, Data: "embedded", Predictions: preds, JSON: out}.Run(&b, r, test))
	require.Empty(t, b.String(), "the Evaluation went to the file")
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	var again train.Evaluation
	require.NoError(t, json.Unmarshal(raw, &again))
	require.Equal(t, preds, again.Predictions)
	require.Equal(t, ev.TestAccuracy, again.TestAccuracy, "the batch size does not change the accuracy")
	csv, err := os.ReadFile(preds)
	require.NoError(t, err)
	require.Equal(t, 51, strings.Count(string(csv), "\n"), "a header and one line per example")

	cnn, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	b.Reset()
	require.ErrorContains(t, train.SavedEval{Weights: weights}.Run(&b, cnn, test), weights)
	require.Empty(t, b.String())
}
