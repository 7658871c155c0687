package train

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestRecipeRuns: every recipe's default method applies, and its
// synchronous, naive and PipeMare runs differ only in schedule and
// techniques.
func TestRecipeRuns(t *testing.T) {
	for _, r := range zoo.Recipes() {
		_, err := FromRecipe(r, "", 100)
		require.NoError(t, err, "%s: its default method applies", r.Model)
		sync := recipeConfig(t, r, MethodSequential, 100)
		require.Equal(t, schedule.Sequential().Name, sync.Schedule.Name)
		naive := recipeConfig(t, r, MethodNaive, 100)
		require.Equal(t, schedule.PipeMare().Name, naive.Schedule.Name)
		require.Zero(t, naive.T1+naive.Warmup)
		require.Zero(t, naive.T2)

		pm := recipeConfig(t, r, MethodPipeMare, 100)
		require.Equal(t, schedule.PipeMare().Name, pm.Schedule.Name)
		require.Equal(t, 100*r.Warmup, pm.Warmup, r.Model)
		require.Equal(t, 100*r.Run.Epochs, pm.Warmup+pm.T1, "%s: T1 spans every step after the warm-up", r.Model)
		require.Equal(t, 0.9, pm.T2)
		pm.Schedule, pm.T1, pm.T2, pm.Warmup = schedule.Schedule{}, 0, 0, 0
		naive.Schedule = schedule.Schedule{} // funcs never compare equal
		require.Equal(t, naive, pm, "%s: the three runs differ only in schedule and techniques", r.Model)
	}
}

// TestMethods: each method sets what it names on the recipe's run and
// nothing else, and the combinations a solver cannot compose are refused.
func TestMethods(t *testing.T) {
	r, err := zoo.RecipeFor("resnet")
	require.NoError(t, err)
	plain := func(c Config) Config {
		c.Schedule, c.T1, c.T2, c.Warmup, c.Spike, c.Predict = schedule.Schedule{}, 0, 0, 0, false, false
		return c
	}
	base := plain(Config{Hyper: r.Run})
	for _, m := range Methods() {
		c := recipeConfig(t, r, m, 125)
		got, err := ParseMethod(string(m))
		require.NoError(t, err)
		require.Equal(t, m, got)
		want := map[Method]string{MethodSequential: "sequential", MethodNaive: "pipemare", MethodPipeMare: "pipemare", MethodSpike: "pipemare",
			MethodPredict: "pipemare", MethodNAdam: "pipedream", Method2BW: "pipedream-2bw"}[m]
		require.Equal(t, want, c.Schedule.Name, m)
		require.Equal(t, m == MethodSpike, c.Spike, m)
		require.Equal(t, m == MethodPredict, c.Predict, m)
		require.Equal(t, m == MethodNAdam, c.NAdam, m)
		withT1 := m == MethodPipeMare || m == MethodSpike || m == MethodPredict
		if withT1 {
			require.Equal(t, 125, c.Warmup, m)
			require.Equal(t, 250, c.T1, "%s: T1 spans the steps after the warm-up", m)
		} else {
			require.Zero(t, c.Warmup+c.T1, m)
		}
		s, err := c.Solver(125)(0)
		require.NoError(t, err, "%s: its solver composes", m)
		var layers []string
		for _, l := range solvers.Chain(s) {
			layers = append(layers, fmt.Sprintf("%T", l))
		}
		want = map[Method]string{
			MethodPipeMare: "*rescheduler.Solver *correction.Solver *solvers.Momentum",
			MethodSpike:    "*rescheduler.Solver *correction.Spike *solvers.Momentum",
			MethodPredict:  "*rescheduler.Solver *correction.Predictor *solvers.Momentum",
			MethodNAdam:    "*rescheduler.Solver *solvers.NAdam",
		}[m]
		if want == "" {
			want = "*rescheduler.Solver *solvers.Momentum"
		}
		require.Equal(t, want, strings.Join(layers, " "), "%s: the solver's layers, outermost first", m)
		if m == MethodNAdam {
			require.Equal(t, 3e-4, c.LR, "AsyncPP's rate")
			c.NAdam, c.LR = false, r.Run.LR
		}
		require.Equal(t, base, plain(c), "%s: the rest is the recipe's run", m)
	}
	_, err = ParseMethod("hogwild")
	require.ErrorContains(t, err, `no method "hogwild" (one of sequential, naive, pipemare, spike, predict, nadam, 2bw)`)
	tr, err := zoo.RecipeFor("transformer")
	require.NoError(t, err)
	_, err = FromRecipe(tr, MethodSpike, 10)
	require.ErrorContains(t, err, "spike compensation needs momentum")
	for name, c := range map[string]Config{
		"t2 0.9: weight prediction cannot have T2": {Predict: true, T2: 0.9},
		"weight prediction with pipedream":         {Predict: true, Schedule: schedule.PipeDream()},
		"not NAdam":                                {Spike: true, NAdam: true},
	} {
		c.LR, c.Epochs = 0.1, 1
		_, err := c.Solver(10)(0)
		require.ErrorContains(t, err, name)
	}
}

// recipeConfig is FromRecipe(r, m, stepsPerEpoch), which must succeed.
func recipeConfig(t testing.TB, r zoo.Recipe, m Method, stepsPerEpoch int) Config {
	t.Helper()
	c, err := FromRecipe(r, m, stepsPerEpoch)
	require.NoError(t, err, "%s %s", r.Model, m)
	return c
}
