package zoo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecipes: every recipe is found by its name, builds its model at the
// recipe's microbatch and loads data that fits it.
func TestRecipes(t *testing.T) {
	_, err := RecipeFor("gpt")
	require.ErrorContains(t, err, `no model "gpt" (one of mlp, cnn, resnet, transformer, transformer-tied)`)
	for _, r := range Recipes() {
		got, err := RecipeFor(r.Model)
		require.NoError(t, err)
		require.Equal(t, r.Model, got.Model)
		m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
		require.NoError(t, err)
		require.Equal(t, r.Model, m.Name)

		train, test, err := r.Load("embedded", 100)
		require.NoError(t, err)
		require.Equal(t, 100, train.Len(), "%s: the first 100 training examples", r.Model)
		require.Greater(t, test.Len(), 1000, "%s: the whole embedded test set", r.Model)
		x, _ := train.Batch(m, []int{0})
		require.Equal(t, m.X.Shape().TotalSize()/m.Batch, x.Shape().TotalSize(), "%s: data that fits the model", r.Model)
	}
}
