package graphsplit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/stageops"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// TestStageOpsTrainTheZooBitForBit trains the zoo's CNN and ResNet a few
// minibatches on real images with the engine (fine-grained stages, the
// recipe's microbatch and N) under every synchronous schedule and PipeDream
// — the user's ops re-applied (WithoutOpSubstitution, recomputing), and
// stage ops recomputing and keeping activations — and requires every trained weight,
// every BatchNorm running statistic and the evaluation loss to be
// bit-identical. (Under PipeMare, keeping and recomputing are two methods:
// see asyncvm.Activations.)
//
// With another BLAS than gonum's (-tags openblas) the stage ops' GEMMs are
// cut differently from gorgonia's and round differently, so only keeping
// against recomputing is compared bit for bit. (The BLAS itself moves more:
// the ResNet's weights after 3 steps differ by up to 5e-3 of their largest
// between gonum's BLAS and OpenBLAS, against 9e-4 between the user's ops
// and stage ops on OpenBLAS.)
func TestStageOpsTrainTheZooBitForBit(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	models := []string{"cnn", "resnet"}
	schedules := []schedule.Schedule{schedule.Sequential(), schedule.GPipe(), schedule.OneFOneB(), schedule.PipeDream()}
	if testing.Short() {
		models, schedules = models[:1], schedules[:1]
	}
	exact := stageops.ExactBLAS()
	for _, name := range models {
		r, err := zoo.RecipeFor(name)
		require.NoError(t, err)
		for _, s := range schedules {
			t.Run(fmt.Sprintf("%s/%s", name, s.Name), func(t *testing.T) {
				kept := trainZoo(t, r, s, asyncvm.Keep)
				var want []gorgonia.Value
				switch {
				case !exact:
					want = trainZoo(t, r, s, asyncvm.Recompute)
				case testing.Short():
					want = trainZoo(t, r, s, asyncvm.Recompute, graphsplit.WithoutOpSubstitution())
				default:
					want = trainZoo(t, r, s, asyncvm.Recompute, graphsplit.WithoutOpSubstitution())
					requireAllBits(t, want, trainZoo(t, r, s, asyncvm.Recompute), "stage ops recomputing")
				}
				requireAllBits(t, want, kept, "stage ops keeping activations")
			})
		}
	}
}

// TestStageOpsKeepTheForwardsReLUMask trains the zoo's CNN under PipeMare
// keeping activations, where a microbatch's backward reads newer weights
// than its forward did, with the stage ops and with the user's ops wherever
// keeping allows them (graphsplit.StatelessOnly: BatchNorm a stage op
// alone, its scale, bias and Rectify gorgonia's), and requires every trained
// weight, every BatchNorm running statistic and the evaluation loss to be
// bit-identical. Gorgonia's backward reads what the forward kept: the
// Rectify's mask and the broadcast scale the forward multiplied by, not the
// current scale and bias.
func TestStageOpsKeepTheForwardsReLUMask(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	if !stageops.ExactBLAS() {
		t.Skip("with another BLAS than gonum's the stage ops' GEMMs round differently from gorgonia's")
	}
	r, err := zoo.RecipeFor("cnn")
	require.NoError(t, err)
	want := trainZoo(t, r, schedule.PipeMare(), asyncvm.Keep, graphsplit.StatelessOnly())
	requireAllBits(t, want, trainZoo(t, r, schedule.PipeMare(), asyncvm.Keep), "stage ops keeping under PipeMare")
}

func requireAllBits(t *testing.T, want, got []gorgonia.Value, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		testutil.RequireBits(t, want[i], got[i], fmt.Sprintf("%s, value %d", what, i))
	}
}

// trainZoo trains recipe r's model for 3 minibatches and returns its
// learnables, its BatchNorm statistics and the evaluation loss on a 4th.
func trainZoo(t *testing.T, r zoo.Recipe, s schedule.Schedule, acts asyncvm.Activations, opts ...graphsplit.Option) []gorgonia.Value {
	t.Helper()
	const steps = 3
	m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, append([]graphsplit.Option{graphsplit.FineGrained()}, opts...)...)
	require.NoError(t, err)
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(s), asyncvm.WithMicrobatches(r.Run.Microbatches), asyncvm.WithActivations(acts),
		asyncvm.WithSolver(func(int) gorgonia.Solver {
			return gorgonia.NewMomentum(gorgonia.WithLearnRate(r.Run.LR), gorgonia.WithMomentum(0.9))
		}))
	require.NoError(t, err)
	defer vm.Close()
	rows := r.Run.Microbatch * r.Run.Microbatches
	train, _, err := r.Load("embedded", rows*(steps+1))
	require.NoError(t, err)
	batch := func(k int) map[*gorgonia.Node]gorgonia.Value {
		idx := make([]int, rows)
		for i := range idx {
			idx[i] = k*rows + i
		}
		x, y := train.Batch(m, idx)
		return map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y}
	}
	ctx := context.Background()
	for k := 0; k < steps; k++ {
		_, err := vm.Step(ctx, batch(k))
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	var out []gorgonia.Value
	for _, l := range m.Learnables {
		c, err := tensorutil.Clone(l.Value())
		require.NoError(t, err)
		out = append(out, c)
	}
	for _, bn := range m.BatchNorms {
		mean, vari := bn.Stats()
		for _, v := range []gorgonia.Value{mean, vari} {
			c, err := tensorutil.Clone(v)
			require.NoError(t, err)
			out = append(out, c)
		}
	}
	loss, err := vm.Evaluate(ctx, batch(steps))
	require.NoError(t, err)
	return append(out, gorgonia.NewF64(loss))
}

// TestOpSubstitutionKeepsTheCuts: stage ops change how stages compute, not
// where the plan cuts — for every zoo model and splitting option, the stage
// table and every stage's ports and learnables are those of the user's ops.
func TestOpSubstitutionKeepsTheCuts(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	for _, r := range zoo.Recipes() {
		m, err := r.Build(r.Run.Microbatch, 1)
		require.NoError(t, err)
		for _, opts := range [][]graphsplit.Option{nil, {graphsplit.Stages(3)}, {graphsplit.FineGrained()}} {
			a, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
			require.NoError(t, err)
			b, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, append(opts, graphsplit.WithoutOpSubstitution())...)
			require.NoError(t, err)
			require.Equal(t, b.String(), a.String(), r.Model)
			for i := range a.Stages {
				require.Equal(t, fmt.Sprint(b.Stages[i].Inputs, b.Stages[i].Outputs, b.Stages[i].Learnables),
					fmt.Sprint(a.Stages[i].Inputs, a.Stages[i].Outputs, a.Stages[i].Learnables), "%s stage %d", r.Model, i)
			}
		}
	}
}
