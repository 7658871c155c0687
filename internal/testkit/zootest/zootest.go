package zootest

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// ForEachModel runs fn on each model's recipe as a subtest that trains a
// few steps: skipped under the race detector (numerics, not concurrency)
// and, with -short, for every model but the MLP.
func ForEachModel(t *testing.T, models []string, fn func(t *testing.T, r zoo.Recipe)) {
	if testutil.RaceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	for _, model := range models {
		t.Run(model, func(t *testing.T) {
			if testing.Short() && model != "mlp" {
				t.Skip("trains a few steps of a larger model")
			}
			r, err := zoo.RecipeFor(model)
			require.NoError(t, err)
			fn(t, r)
		})
	}
}

// FewSteps returns the embedded data for steps minibatches of r's run and
// the first testRows test images (a CMUdict test set whole).
func FewSteps(t testing.TB, r zoo.Recipe, steps, testRows int) (train, test zoo.Data) {
	t.Helper()
	train, test, err := r.Load("embedded", steps*r.Run.Microbatch*r.Run.Microbatches)
	require.NoError(t, err)
	if d, ok := test.(*zoo.Dataset); ok {
		test = d.Head(testRows)
	}
	return train, test
}
