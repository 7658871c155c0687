package zoo

import (
	"testing"

	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

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

		sync := r.Synchronous()
		require.Equal(t, schedule.Sequential.Name, sync.Schedule.Name)
		naive := r.Naive()
		require.Equal(t, schedule.PipeMare.Name, naive.Schedule.Name)
		require.Zero(t, naive.T1+naive.Warmup)
		require.Zero(t, naive.T2)

		pm := r.PipeMare(100)
		require.Equal(t, schedule.PipeMare.Name, pm.Schedule.Name)
		require.Equal(t, 100*r.Warmup, pm.Warmup, r.Model)
		require.Equal(t, 100*r.Run.Epochs, pm.Warmup+pm.T1, "%s: T1 spans every step after the warm-up", r.Model)
		require.Equal(t, 0.9, pm.T2)
		pm.Schedule, pm.T1, pm.T2, pm.Warmup = schedule.Schedule{}, 0, 0, 0
		naive.Schedule = schedule.Schedule{} // funcs never compare equal
		require.Equal(t, naive, pm, "%s: the three runs differ only in schedule and techniques", r.Model)
	}
}
