package zoo

import (
	"context"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/stretchr/testify/require"
)

// TestKeepIsBitIdenticalWhenSynchronous trains every zoo model's
// synchronous baseline for a few steps recomputing activations and keeping
// them (asyncvm.Keep), and requires bit-identical final weights: under the
// sequential schedule no weight moves between a microbatch's forward and
// its backward, so the kept activations are the ones a recomputation would
// derive. The accuracy checks' baselines keep them for speed, relying on
// this.
func TestKeepIsBitIdenticalWhenSynchronous(t *testing.T) {
	if raceEnabled {
		t.Skip("training runs are skipped under the race detector")
	}
	for _, model := range []string{"mlp", "cnn", "resnet", "transformer"} {
		t.Run(model, func(t *testing.T) {
			if testing.Short() && model != "mlp" {
				t.Skip("trains a few steps of a larger model")
			}
			r, err := RecipeFor(model)
			require.NoError(t, err)
			rows := r.Run.Microbatch * r.Run.Microbatches
			train, test, err := r.Load("embedded", 3*rows)
			require.NoError(t, err)
			if d, ok := test.(*Dataset); ok {
				test = d.Head(100)
			}
			r.Run.Epochs = 1
			cfg, err := r.Config(MethodSequential, 3)
			require.NoError(t, err)
			hashes, kept := map[asyncvm.Activations]string{}, map[asyncvm.Activations]int64{}
			for _, a := range []asyncvm.Activations{asyncvm.Recompute, asyncvm.Keep} {
				cfg.Activations = a
				res, err := Train(context.Background(), r.Build, train, test, cfg)
				require.NoError(t, err, "activations %d", a)
				hashes[a] = planSHA256(t, res.Plan)
				kept[a] = res.Report.Memory.StashedActivation
			}
			require.Greater(t, kept[asyncvm.Keep], kept[asyncvm.Recompute], "keeping holds more than the stages' inputs")
			require.Equal(t, hashes[asyncvm.Recompute], hashes[asyncvm.Keep], "%s: keeping activations changed the synchronous weights", model)
		})
	}
}
