package train

import (
	"context"
	"math"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/zoo"

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
	zootest.ForEachModel(t, []string{"mlp", "cnn", "resnet", "transformer"}, func(t *testing.T, r zoo.Recipe) {
		train, test := zootest.FewSteps(t, r, 3, 100)
		r.Run.Epochs = 1
		cfg, err := FromRecipe(r, MethodSequential, 3)
		require.NoError(t, err)
		hashes, kept := map[bool]string{}, map[bool]int64{}
		for _, keep := range []bool{false, true} {
			cfg.KeepActivations = keep
			res, err := Train(context.Background(), r.Build, train, test, cfg)
			require.NoError(t, err, "keeping activations: %v", keep)
			hashes[keep] = testutil.PlanSHA256(t, res.Plan)
			kept[keep] = res.Report.Memory.StashedActivation
		}
		require.Greater(t, kept[true], kept[false], "keeping holds more than the stages' inputs")
		require.Equal(t, hashes[false], hashes[true], "%s: keeping activations changed the synchronous weights", r.Model)
	})
}

// TestOneStageBaselineIsThePipelinesBitForBit trains the synchronous
// baseline of every zoo model for a few steps on one stage and cut at fine
// grain, as the accuracy checks' baselines run on one stage: on the
// Fashion-MNIST models the final weights are bit-identical; on the
// Transformer, whose split changes some float rounding (not traced to the
// op), every weight agrees to float32 rounding.
func TestOneStageBaselineIsThePipelinesBitForBit(t *testing.T) {
	zootest.ForEachModel(t, []string{"mlp", "cnn", "resnet", "transformer"}, func(t *testing.T, r zoo.Recipe) {
		train, test := zootest.FewSteps(t, r, 3, 100)
		r.Run.Epochs = 1
		cfg, err := FromRecipe(r, MethodSequential, 3)
		require.NoError(t, err)
		cfg.KeepActivations = true
		var weights [2][][]float32
		var hashes [2]string
		var stages [2]int
		var names []string
		for i, p := range []int{1, 0} {
			cfg.Stages = p
			res, err := Train(context.Background(), r.Build, train, test, cfg)
			require.NoError(t, err, "stages %d", p)
			hashes[i], stages[i] = testutil.PlanSHA256(t, res.Plan), res.Stages
			names = names[:0]
			for _, n := range res.Plan.Learnables {
				weights[i] = append(weights[i], append([]float32(nil), n.Value().Data().([]float32)...))
				names = append(names, n.Name())
			}
		}
		require.Greater(t, stages[1], 1, "fine grain cuts the model")
		if r.Model != "transformer" {
			require.Equal(t, hashes[0], hashes[1], "%s: one stage and %d train different synchronous weights", r.Model, stages[1])
			return
		}
		require.NotEqual(t, hashes[0], hashes[1], "the zoo.Transformer's rounding differs (else this test would say bit-identical)")
		for i := range weights[0] {
			for j, a := range weights[0][i] {
				b := weights[1][i][j]
				require.InDelta(t, a, b, 1e-5*(1+math.Abs(float64(a))), "learnable %d (%s) element %d", i, names[i], j)
			}
		}
	})
}
