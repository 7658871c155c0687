package train_test

import (
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
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

// TestBalancedPlacementHalvesTheResNetsCost: the ResNet's 15 fine stages
// on 2 processes are split where the plan's own estimated costs halve —
// the cut is one of the two stage boundaries around half the total, the
// heavier process carrying less than half plus the stage at the cut — and
// no contiguous split has a lighter heavier process; contiguous by count
// (8 and 7 stages) puts the stem's heavy stages on one process, carrying
// more.
func TestBalancedPlacementHalvesTheResNetsCost(t *testing.T) {
	r, err := zoo.RecipeFor("resnet")
	require.NoError(t, err)
	costs, err := train.PlanCosts(r, train.Config{Hyper: r.Run}, "fine")
	require.NoError(t, err)
	require.Len(t, costs, 15)
	hosts := schedule.Balanced.Hosts(costs, 2)
	require.Len(t, hosts, 2)
	cut := len(hosts[0])
	sum := func(from, to int) (s float64) {
		for _, c := range costs[from:to] {
			s += c
		}
		return s
	}
	total := sum(0, len(costs))
	// the boundary k at which the running sum crosses half the total
	k := 0
	for sum(0, k+1) < total/2 {
		k++
	}
	require.Contains(t, []int{k, k + 1}, cut, "the cut is at a boundary around half the cost: before stage %d or %d (costs %v)", k, k+1, costs)
	heavier := max(sum(0, cut), sum(cut, len(costs)))
	require.LessOrEqual(t, heavier, total/2+max(costs[cut-1], costs[cut]))
	for e := 1; e < len(costs); e++ {
		require.LessOrEqual(t, heavier, max(sum(0, e), sum(e, len(costs))), "no cut before stage %d is more even", e)
	}
	byCount := schedule.Contiguous.Hosts(costs, 2)
	require.Greater(t, max(sum(0, len(byCount[0])), sum(len(byCount[0]), len(costs))), heavier, "by count is less even")
}
