package experiment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGridLists: the lists fill the grid; each bad list is an error
// naming its flag.
func TestGridLists(t *testing.T) {
	g := Grid{Baseline: "sequential", CheckpointEvery: 10}
	require.NoError(t, GridLists{Methods: "sequential,spike(warmup=0.1)", Microbatches: "4,2", Delays: "fixed:1", Epochs: "0,2", Seeds: "1,2,3"}.Parse(&g))
	require.Len(t, g.Methods, 2)
	require.Len(t, g.Settings, 3)
	require.Equal(t, []int{0, 2}, g.Epochs)
	require.Equal(t, []int64{1, 2, 3}, g.Seeds)

	ok := GridLists{Methods: "sequential", Microbatches: "4", Epochs: "1", Seeds: "1"}
	for _, c := range []struct {
		change func(*GridLists, *Grid)
		err    string
	}{
		{func(l *GridLists, _ *Grid) { l.Methods = "pipemare" }, "methods: the baseline sequential (baseline) is not among them"},
		{func(l *GridLists, _ *Grid) { l.Methods = "sequential,hogwild" }, `methods: train: no method "hogwild"`},
		{func(l *GridLists, _ *Grid) { l.Microbatches = "" }, "microbatches and delays: no setting"},
		{func(l *GridLists, _ *Grid) { l.Delays = "fixed:1.5" }, "microbatches and delays: "},
		{func(l *GridLists, _ *Grid) { l.Epochs = "2,x" }, `epochs "2,x": "x" is not a number of epochs`},
		{func(l *GridLists, _ *Grid) { l.Seeds = "one" }, `seeds "one": "one" is not a number`},
		{func(_ *GridLists, g *Grid) { g.CheckpointEvery = -1 }, "checkpoint_every -1: a number of steps (0: no checkpoints)"},
	} {
		l, g := ok, Grid{Baseline: "sequential"}
		c.change(&l, &g)
		require.ErrorContains(t, l.Parse(&g), c.err)
	}
}
