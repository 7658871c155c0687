package train_test

import (
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// TestPlanCosts: the plan's stages' costs, one per layer or per stage
// asked, as the plan gives them; too many stages or a cut past the
// model's ops is a *runspec.Error naming the setting.
func TestPlanCosts(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	for _, c := range []struct {
		cfg  train.Config
		want int
	}{{train.Config{Hyper: r.Run}, 3}, {train.Config{Hyper: r.Run, Stages: 2}, 2}} {
		costs, err := train.PlanCosts(r, c.cfg, "x")
		require.NoError(t, err)
		require.Len(t, costs, c.want)
		_, plan, err := c.cfg.Split(r.Build)
		require.NoError(t, err)
		require.Equal(t, plan.Costs(), costs)
		plan.Close()
	}
	_, err = train.PlanCosts(r, train.Config{Hyper: r.Run, Stages: 4}, "4")
	var ce *runspec.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.EqualError(t, err, "stages 4: the mlp model cuts into at most 3 stages, one per layer (stages fine)")
	_, err = train.PlanCosts(r, train.Config{Hyper: r.Run, Cut: []int{100000}, Stages: 2}, "fine")
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Regexp(t, `^cut 100000: `, err.Error())
}
