package train

import (
	"context"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestZeroBubbleSchedulesTrainTheZooLikeSequential trains a few steps of
// every zoo model's recipe with sequential, ZB-H1, ZB-H2, interleaved 1F1B
// and ZB-V — at fine grain, or on one stage fewer where the two stages per
// worker need an even number — and requires the weights_sha256 of
// sequential from each.
func TestZeroBubbleSchedulesTrainTheZooLikeSequential(t *testing.T) {
	zootest.ForEachModel(t, []string{"mlp", "cnn", "resnet", "transformer"}, func(t *testing.T, r zoo.Recipe) {
		trainSet, test := zootest.FewSteps(t, r, 2, 20)
		steps := trainSet.Len() / (r.Run.Microbatch * r.Run.Microbatches)
		run := func(s schedule.Schedule, stages int, cut []int) *Result {
			cfg := recipeConfig(t, r, MethodSequential, steps)
			cfg.Epochs, cfg.Schedule, cfg.Stages, cfg.Cut = 1, s, stages, cut
			res, err := Train(context.Background(), r.Build, trainSet, test, cfg)
			require.NoError(t, err, s.Name)
			return res
		}
		seq := run(schedule.Sequential(), 0, nil)
		want := testutil.PlanSHA256(t, seq.Plan)
		var even *Result // sequential on an even number of stages
		for _, s := range []schedule.Schedule{schedule.ZBH1(), schedule.ZBH2(), schedule.Interleaved(2), schedule.ZBV()} {
			if seq.Stages%s.Virtual() == 0 {
				require.Equal(t, want, testutil.PlanSHA256(t, run(s, 0, nil).Plan), "%s: not the weights sequential trains", s.Name)
				continue
			}
			if even == nil {
				even = run(schedule.Sequential(), seq.Stages-1, nil)
			}
			got := run(s, even.Stages, even.Config.Cut)
			require.Equal(t, testutil.PlanSHA256(t, even.Plan), testutil.PlanSHA256(t, got.Plan), "%s on %d stages: not the weights sequential trains", s.Name, even.Stages)
		}
	})
}
