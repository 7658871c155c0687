package footprint_test

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/footprint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTableFollowsTheDelays checks every row of a real split against the
// definitions: τ_i = ceil((2(P−1−i)+1)/N), PipeDream's stash τ_i × the
// stage's weights, T2's δ one copy, the solver's state slots copies.
func TestTableFollowsTheDelays(t *testing.T) {
	m, err := testmodels.ResNet(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	p := len(plan.Stages)
	require.GreaterOrEqual(t, p, 4)
	tab, err := footprint.Of(plan, 2, 1)
	require.NoError(t, err)
	var sum footprint.Row
	for i, r := range tab.Stages {
		w := int64(8 * plan.Stages[i].NumParams())
		require.Equal(t, (2*(p-1-i)+1+1)/2, r.Delay, "stage %d", i)
		require.Equal(t, footprint.Row{Stage: i, Delay: r.Delay, Weights: w, Optimizer: w, Correction: w, WeightStash: int64(r.Delay) * w}, r)
		sum.Weights += w
		sum.WeightStash += r.WeightStash
	}
	require.Equal(t, sum.Weights, tab.Total.Weights)
	require.Equal(t, sum.WeightStash, tab.Total.WeightStash)
	require.Equal(t, p, tab.Total.Delay) // stage 0: ceil((2p−1)/2)
	require.InDelta(t, float64(2*sum.Weights+sum.WeightStash)/float64(3*sum.Weights), tab.Ratio(), 1e-12)

	_, err = footprint.Of(plan, 0, 1)
	require.ErrorContains(t, err, "N ≥ 1")
	_, err = footprint.Of(nil, 1, 1)
	require.Error(t, err)
}

// TestStashIsWhatPipeDreamHolds trains the test CNN with the engine's
// PipeDream and compares each stage's peak of weight versions with the
// table's τ_i + 1 (the engine copies the current version too, at each
// forward).
func TestStashIsWhatPipeDreamHolds(t *testing.T) {
	const n = 2
	m, err := testmodels.CNN(tensor.Float32, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(schedule.PipeDream()), asyncvm.WithMicrobatches(n))
	require.NoError(t, err)
	defer vm.Close()
	rng := rand.New(rand.NewSource(1))
	ctx := context.Background()
	for k := 0; k < 6; k++ {
		feeds := map[*gorgonia.Node]gorgonia.Value{}
		batches := [][]gorgonia.Value{m.Batch(rng), m.Batch(rng)}
		for i, in := range m.Inputs {
			a, b := batches[0][i].(*tensor.Dense), batches[1][i].(*tensor.Dense)
			c, err := a.Concat(0, b)
			require.NoError(t, err)
			feeds[in] = c
		}
		_, err := vm.Step(ctx, feeds)
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	tab, err := footprint.Of(plan, n, 1)
	require.NoError(t, err)
	rep := vm.Report()
	for i, r := range tab.Stages {
		require.Equal(t, r.Delay+1, rep.PerStage[i].PeakWeightVersions, "stage %d", i)
		require.Equal(t, r.WeightStash+r.Weights, rep.PerStage[i].Memory.StashedWeights, "stage %d", i)
	}
}

func TestWrite(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float32, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	tab, err := footprint.Of(plan, 1, 2)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, tab.Write(&b, true))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, len(plan.Stages)+3) // header, stages, total, ratio
	require.Contains(t, lines[len(lines)-2], "total")
	require.Contains(t, lines[len(lines)-1], "PipeDream needs")
}
