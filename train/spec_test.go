package train

import (
	"testing"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestEmptySpecIsTheRecipe: a spec that changes nothing gives the
// recipe's run of its default method, for every model.
func TestEmptySpecIsTheRecipe(t *testing.T) {
	for _, r := range zoo.Recipes() {
		got, err := ConfigFor(runspec.Spec{Model: r.Model}, r, 8000)
		require.NoError(t, err, r.Model)
		want, err := FromRecipe(r, "", 8000/(r.Run.Microbatch*r.Run.Microbatches))
		require.NoError(t, err, r.Model)
		require.Equal(t, runspec.Spec{Model: r.Model}, got.Spec, "the config records its spec")
		got.Spec = runspec.Spec{}
		got.Schedule, want.Schedule = schedule.Schedule{}, schedule.Schedule{} // funcs never compare equal
		require.Equal(t, want, got, r.Model)
	}
}

// TestConfigFor: what the spec gives replaces the recipe's and the
// method's, a synchronous schedule drops the techniques, and values and
// runs that cannot train are refused with a *runspec.Error naming the
// setting.
func TestConfigFor(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	no, seed, beta, gamma := false, int64(7), 0.5, 0.5
	ov := runspec.Spec{Model: "mlp", Method: "pipemare", LR: 0.1, Momentum: &beta, Cosine: &no, Seed: &seed, Epochs: 3, T2: &gamma, Cut: "6"}
	c, err := ConfigFor(ov, r, 8000)
	require.NoError(t, err)
	require.Equal(t, 0.1, c.LR)
	require.Equal(t, "Momentum(0.5)", c.SolverName())
	require.False(t, c.Cosine)
	require.Equal(t, seed, c.Seed)
	require.Equal(t, 0.5, c.T2)
	require.Equal(t, []int{6}, c.Cut)
	require.Equal(t, 2, c.Stages)
	require.Equal(t, 125, c.Warmup, "the recipe's warm-up: one epoch")
	require.Equal(t, 250, c.T1, "T1: the steps after the warm-up")

	ov.Schedule = "gpipe"
	c, err = ConfigFor(ov, r, 8000)
	require.NoError(t, err)
	require.Zero(t, c.T1+c.Warmup, "no technique on a synchronous schedule")

	one, w500 := 1.0, 500
	for _, bad := range []struct {
		edit func(*runspec.Spec)
		msg  string
	}{
		{func(o *runspec.Spec) { o.Momentum = &one }, "momentum 1: must be in [0, 1)"},
		{func(o *runspec.Spec) { o.Schedule = "hogwild" }, `schedule "hogwild": unknown schedule (one of sequential,`},
		{func(o *runspec.Spec) { o.Stages, o.Cut = "3", "6" }, "stages 3 and cut 6: the cut makes 2 stages; give one of the two"},
		{func(o *runspec.Spec) { o.Cut = "7,6" }, `cut "7,6": increasing op positions`},
		{func(o *runspec.Spec) { o.Epochs = 1 }, "epochs 1: the mlp recipe's warm-up of 1 epoch (125 steps) covers the whole run"},
		{func(o *runspec.Spec) { o.Epochs = 80001 }, "epochs 80001: 80001 epochs of 125 steps are more than the 10000000 steps a run can train"},
		{func(o *runspec.Spec) { o.Warmup = &w500 }, "warmup 500: the synchronous warm-up covers the whole run of 500 steps"},
		{func(o *runspec.Spec) { o.Limit = 10 }, "limit 10: 10 training examples make no minibatch of 4 microbatches × 16 rows; give limit 64 or more"},
		{func(o *runspec.Spec) { o.Method, o.T2 = "predict", &gamma }, "t2 0.5: weight prediction (method predict) cannot have T2"},
	} {
		o := runspec.Spec{Model: "mlp"}
		bad.edit(&o)
		n := 8000
		if o.Limit > 0 {
			n = o.Limit
		}
		_, err := ConfigFor(o, r, n)
		var se *runspec.Error
		require.ErrorAs(t, err, &se)
		require.ErrorContains(t, err, bad.msg)
	}
}
