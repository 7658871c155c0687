package correction_test

import (
	"context"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// meanDiscrepancy trains the test ResNet with PipeMare at fine grain (8
// stages, N=1, so stage 0 reads weights 15 updates old) and returns the
// mean ‖u_bkwd − u_fwd‖/‖u_fwd‖ the engine measured over all backwards.
func meanDiscrepancy(t *testing.T, newSolver func(stage int) gorgonia.Solver) (float64, []float64) {
	m, err := testmodels.ResNet(tensor.Float64, 8, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(schedule.PipeMare()), asyncvm.WithSolver(newSolver), asyncvm.WithDiscrepancy())
	require.NoError(t, err)
	defer vm.Close()
	rng := rand.New(rand.NewSource(4))
	var batches []map[*gorgonia.Node]gorgonia.Value
	for k := 0; k < 60; k++ {
		feeds := map[*gorgonia.Node]gorgonia.Value{}
		for i, v := range m.Batch(rng) {
			feeds[m.Inputs[i]] = v
		}
		batches = append(batches, feeds)
	}
	losses, err := vm.Run(context.Background(), batches)
	require.NoError(t, err)
	for _, l := range losses {
		require.True(t, tensorutil.Finite(gorgonia.NewF64(l)))
	}
	rep := vm.Report()
	sum := 0.0
	var per []float64
	for _, sr := range rep.PerStage[:len(rep.PerStage)-1] { // the last stage has τ ≤ 1
		sum += sr.Discrepancy
		per = append(per, sr.Discrepancy)
	}
	return sum / float64(len(per)), per
}

// TestCorrectionShrinksTheDiscrepancy: T2 brings the weights the backward
// reads at least twice as close to the weights the forward read as naive
// PipeMare does, on a real model run.
func TestCorrectionShrinksTheDiscrepancy(t *testing.T) {
	momentum := func() gorgonia.Solver {
		return gorgonia.NewMomentum(gorgonia.WithLearnRate(0.02), gorgonia.WithMomentum(0.9))
	}
	naive, naivePer := meanDiscrepancy(t, func(int) gorgonia.Solver { return momentum() })
	corrected, corrPer := meanDiscrepancy(t, func(int) gorgonia.Solver {
		s, err := correction.New(momentum(), correction.WithGamma(0.9))
		require.NoError(t, err)
		return s
	})
	t.Logf("mean ‖u_bkwd − u_fwd‖/‖u_fwd‖: naive %.3g, T2 %.3g (%.1f× smaller)", naive, corrected, naive/corrected)
	t.Logf("per stage naive %.3g", naivePer)
	t.Logf("per stage T2    %.3g", corrPer)
	require.Positive(t, naive)
	require.GreaterOrEqual(t, naive/corrected, 2.0)
}
