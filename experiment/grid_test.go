package experiment

import (
	"testing"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

func mustVariant(t *testing.T, s string) Variant {
	t.Helper()
	v, err := ParseVariant(s)
	require.NoError(t, err)
	return v
}

// TestGridPlan: a run's configuration is the recipe's, the setting's N and
// rows, the method's techniques, then the variant's parameters (fractions
// of the run turned into steps), as train.ConfigFor makes it of the run's
// specification, which pipemare train trains alike; the runs a method
// cannot train are refused, saying why.
func TestGridPlan(t *testing.T) {
	r, err := zoo.RecipeFor("mlp") // 16 × 4 rows, 4 epochs, warm-up 1 epoch, cosine
	require.NoError(t, err)
	g := &Grid{Model: "mlp", Data: "embedded", Stages: "fine", CheckpointEvery: 7}
	sets, err := ParseSettings("4,2", "fixed:2")
	require.NoError(t, err)
	require.NoError(t, Fill(sets, r.Run, 3))
	require.Equal(t, []float64{2, 3, 2}, []float64{sets[0].Tau0, sets[1].Tau0, sets[2].Tau0}, "τ_0 = ceil(5/N); the injected delay")
	require.Equal(t, 32, sets[1].MicrobatchRows, "N=2 at the recipe's minibatch of 4 × 16")
	plan := func(v string, s Setting, epochs int, trainLen int) plan {
		pl, err := g.plan(r, Run{Variant: mustVariant(t, v), Setting: s, Epochs: epochs, Seed: 2}, 3, trainLen)
		require.NoError(t, err)
		return pl
	}

	pl := plan("spike(warmup=0.05,t1=0.5,decay=step)", sets[0], 4, 640) // 10 steps an epoch
	require.Empty(t, pl.refused)
	require.Equal(t, 40, pl.steps)
	c := pl.cfg
	require.Equal(t, schedule.PipeMare().Name, c.Schedule.Name)
	require.Equal(t, []int{2, 19, 7, 4, 16, 4}, []int{c.Warmup, c.T1, c.CheckpointEvery, c.Microbatches, c.Microbatch, c.Epochs}, "warm-up 5 % of 40 steps; K half of the other 38")
	require.True(t, c.Spike && c.StepDecay && !c.Cosine)
	require.Zero(t, c.T2)
	require.Equal(t, int64(2), c.Seed)
	require.JSONEq(t, `{"model":"mlp","data":"embedded","method":"spike","microbatch":16,"microbatches":4,"epochs":4,"step_decay":true,"t1":19,"warmup":2,"seed":2}`, string(pl.spec.JSON()))

	c = plan("pipemare", sets[1], 3, 640).cfg
	require.Equal(t, []int{10, 20, 2, 32}, []int{c.Warmup, c.T1, c.Microbatches, c.Microbatch}, "the recipe's warm-up of an epoch; K every step after it")
	require.Equal(t, 0.9, c.T2)
	require.True(t, c.Cosine)

	c = plan("sequential", sets[0], 4, 640).cfg
	require.Equal(t, schedule.Sequential().Name, c.Schedule.Name)
	require.Zero(t, c.Warmup+c.T1)

	c = plan("pipemare", sets[2], 4, 640).cfg
	require.Zero(t, c.Warmup, "injected delays start at the first step")
	require.Equal(t, delay.Fixed{2, 2, 2}, c.Delays)
	require.Equal(t, 0, *plan("pipemare", sets[2], 4, 640).spec.Warmup, "the spec says so")

	for v, why := range map[string]string{
		"predict(t2=0.9)":    "t2 0.9: weight prediction (method predict) cannot have T2",
		"2bw":                "pipedream-2bw needs N ≥ 5 on 3 stages",
		"naive(warmup=0.99)": "warmup 40: the synchronous warm-up covers the whole run of 40 steps",
	} {
		require.Contains(t, plan(v, sets[0], 4, 640).refused, why, v)
	}
	require.Contains(t, plan("sequential", sets[2], 4, 640).refused, "injected delays stand for PipeMare's pipeline")
	_, err = g.plan(r, Run{Variant: mustVariant(t, "naive"), Setting: sets[0], Epochs: 1, Seed: 1}, 3, 63)
	require.ErrorContains(t, err, "63 training examples make no minibatch of 4 × 16 rows")
}

func TestParseSettings(t *testing.T) {
	for _, c := range []struct{ n, d, msg string }{
		{"0", "", `"0" is not a positive number`},
		{"", "fixed:1.5", "neither fixed:D"},
		{"", "uniform:3", "neither fixed:D"},
	} {
		_, err := ParseSettings(c.n, c.d)
		require.ErrorContains(t, err, c.msg)
	}
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	sets, err := ParseSettings("5", "")
	require.NoError(t, err)
	require.ErrorContains(t, Fill(sets, r.Run, 3), "N=5 does not divide the recipe's minibatch of 64 rows (4 × 16)")
}
