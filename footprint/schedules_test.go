package footprint_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/footprint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestScheduleCost: on the test MLP at fine grain, the activations a
// schedule keeps are each stage's inputs times the microbatches its list
// holds at most — GPipe N per stage, 1F1B P−i, PipeMare min(2(P−i), ...) —
// and only the asynchronous schedules add weight-sized buffers.
func TestScheduleCost(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	p, n := len(plan.Stages), 8
	in := make([]int64, p)
	for i, st := range plan.Stages {
		for _, pt := range st.Inputs {
			in[i] += pt.Bytes()
		}
	}
	tab, err := footprint.Of(plan, n, 1)
	require.NoError(t, err)
	sync := tab.Total.Weights + tab.Total.Optimizer
	for _, c := range []struct {
		s       schedule.Schedule
		held    func(i int) int64
		weights int64
	}{
		{schedule.GPipe(), func(int) int64 { return int64(n) }, sync},
		{schedule.OneFOneB(), func(i int) int64 { return int64(min(p-i, n)) }, sync},
		{schedule.ZBH1(), func(i int) int64 { return int64(min(p, n)) }, sync},
		{schedule.PipeMare(), func(i int) int64 { return int64(min(2*(p-i), 4*n)) }, sync + tab.Total.Correction},
		{schedule.PipeDream(), func(i int) int64 { return int64(min(2*(p-i), 4*n)) }, sync + tab.Total.WeightStash},
	} {
		got, err := footprint.ScheduleCost(plan, c.s, n, 4, 1)
		require.NoError(t, err)
		var want int64
		for i := range in {
			want += c.held(i) * in[i]
		}
		require.Equal(t, want, got.Activations, c.s.Name)
		require.Equal(t, c.weights, got.Weights, c.s.Name)
		require.Equal(t, p, got.Workers, c.s.Name)
	}
	_, err = footprint.ScheduleCost(plan, schedule.ZBV(), n, 1, 1)
	if p%2 == 1 {
		require.Error(t, err, "ZB-V needs an even number of stages")
	}
}

var paperScale = flag.Bool("paper-scale", false, "run TestPaperScale: docs/results.md's table at the PipeMare paper's scale (about 20 s)")

// TestPaperScale prints, for ResNet-50 at microbatch 1 with Momentum on
// 107 devices (the PipeMare paper's setting), every schedule's utilization
// and memory at N = 8, 32 and 214 (= 2P, where the zero-bubble schedules
// reach their zero bubble): docs/results.md's table. ZB-V places two
// stages on each device, so it splits the model into 214. The schedules
// without a flush (ZB-H2, PipeDream, PipeMare) run 5,000 microbatches, as
// the paper's 625 steps of 8, so that their one fill counts little. It
// takes about twenty seconds, a measurement for the docs, not a check: it
// runs with -paper-scale only.
func TestPaperScale(t *testing.T) {
	if !*paperScale {
		t.Skip("two splits of ResNet-50 and long replays (-paper-scale runs them); TestScheduleCost covers ScheduleCost")
	}
	m, err := testmodels.ResNet50(tensor.Float32, 1, 1)
	require.NoError(t, err)
	plans := map[int]*graphsplit.Plan{}
	for _, p := range []int{107, 214} {
		plans[p], err = graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(p))
		require.NoError(t, err)
	}
	for _, n := range []int{8, 32, 214} {
		for _, s := range []schedule.Schedule{schedule.GPipe(), schedule.OneFOneB(), schedule.ZBH1(), schedule.ZBH2(), schedule.ZBV(), schedule.PipeDream(), schedule.PipeMare()} {
			plan := plans[107*s.Virtual()]
			steps := schedule.TableSteps(s, len(plan.Stages), n)
			if steps > 1 { // no flush: a run of 5,000 microbatches, the fill counted once
				steps = (5000 + n - 1) / n
			}
			c, err := footprint.ScheduleCost(plan, s, n, steps, 1)
			require.NoError(t, err)
			t.Log(fmt.Sprintf("| %d | %s | %d | %.3f | %.0f | %.0f | %.0f |", n, s.Name, steps, c.Utilization,
				float64(c.Weights)/(1<<20), float64(c.Activations)/(1<<20), float64(c.Total())/(1<<20)))
		}
	}
}
