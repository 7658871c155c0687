package asyncvm

import (
	"context"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestSaveRestoreContinuesExactly: a run that saves after 5 steps and goes
// on equals, bit for bit, a fresh VM restored from that state that trains
// the same later steps — with BatchNorm (the test CNN), with a stateful
// solver (NAdam), under PipeMare and under delay injection.
func TestSaveRestoreContinuesExactly(t *testing.T) {
	const n, first, more = 2, 5, 5
	vanilla := func(int) gorgonia.Solver {
		s, err := solvers.NewSGD(solvers.WithLearnRate(0.05))
		if err != nil {
			panic(err)
		}
		return s
	}
	nadam := func(int) gorgonia.Solver {
		s, err := solvers.NewNAdam(solvers.WithNAdamLearnRate(0.01))
		if err != nil {
			panic(err)
		}
		return s
	}
	for _, c := range []struct {
		name   string
		newVM  func(*graphsplit.Plan) (*VM, error)
		solver func(int) gorgonia.Solver
	}{
		{"pipemare/vanilla", func(p *graphsplit.Plan) (*VM, error) {
			return New(p, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithSolver(vanilla))
		}, vanilla},
		{"pipedream/nadam", func(p *graphsplit.Plan) (*VM, error) {
			return New(p, WithMicrobatches(n), WithSchedule(schedule.PipeDream()), WithSolver(nadam))
		}, nadam},
		{"injected/vanilla", func(p *graphsplit.Plan) (*VM, error) {
			return NewInjected(p, delay.Fixed{3, 2, 1, 0}, WithMicrobatches(n), WithSolver(vanilla))
		}, vanilla},
	} {
		t.Run(c.name, func(t *testing.T) {
			build := func() (*testmodels.Model, *VM) {
				m, err := testmodels.CNN(tensor.Float64, 4, 1)
				require.NoError(t, err)
				plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
				require.NoError(t, err)
				vm, err := c.newVM(plan)
				require.NoError(t, err)
				return m, vm
			}
			ctx := context.Background()
			m, vm := build()
			defer vm.Close()
			d := makeData(m, n*(first+more), 4)
			for k := 0; k < first; k++ {
				_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
				require.NoError(t, err)
			}
			st, err := vm.Save(ctx)
			require.NoError(t, err)
			require.Equal(t, first, st.Steps)
			for k := first; k < first+more; k++ {
				_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
				require.NoError(t, err)
			}
			require.NoError(t, vm.Flush(ctx))
			want := snapshot(t, m.LearnableValues())
			mean, _ := m.BatchNorms[0].Stats()
			wantMean := mean.Clone().(tensor.Tensor)

			m2, vm2 := build()
			defer vm2.Close()
			require.NoError(t, vm2.Restore(ctx, st))
			for k := first; k < first+more; k++ {
				_, err := vm2.Step(ctx, d.minibatch(t, m2.Inputs, k, n))
				require.NoError(t, err)
			}
			require.NoError(t, vm2.Flush(ctx))
			require.True(t, bitsEqual(want, m2.LearnableValues()), "the restored run continues bit for bit")
			mean2, _ := m2.BatchNorms[0].Stats()
			require.Equal(t, wantMean.Data(), mean2.Data(), "and so do BatchNorm's running statistics")
			require.ErrorContains(t, vm2.Restore(ctx, st), "has trained 10 steps already")
		})
	}
}

// TestSaveRefusesHiddenSolverState: gorgonia's Momentum hides its velocity,
// so Save says which solver cannot be saved; the VM goes on training.
func TestSaveRefusesHiddenSolverState(t *testing.T) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan, WithMicrobatches(2), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer vm.Close()
	d := makeData(m, 4, 1)
	ctx := context.Background()
	_, err = vm.Step(ctx, d.minibatch(t, m.Inputs, 0, 2))
	require.NoError(t, err)
	_, err = vm.Save(ctx)
	require.ErrorContains(t, err, "cannot save its state: gorgonia's solvers keep theirs in unexported fields")
	_, err = vm.Step(ctx, d.minibatch(t, m.Inputs, 1, 2))
	require.NoError(t, err, "a refused save does not stop the pipeline")
	fresh, err := New(plan, WithMicrobatches(2))
	require.NoError(t, err)
	defer fresh.Close()
	require.ErrorContains(t, fresh.Restore(ctx, &State{}), "the state has 0 stages, the plan 3")
}

// TestCheckpointResumeContinuesExactly: the same as a Save and Restore,
// through a checkpoint on disk: every stage writes its shard, the driver
// the manifest; a fresh VM resumed from it continues bit for bit. A
// checkpoint of another cut is refused, naming what differs.
func TestCheckpointResumeContinuesExactly(t *testing.T) {
	const n, first, more = 2, 4, 4
	sgd := pipeMare(6, 0.9)
	build := func(opts ...graphsplit.Option) (*testmodels.Model, *VM) {
		m, err := testmodels.CNN(tensor.Float64, 4, 1)
		require.NoError(t, err)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, append([]graphsplit.Option{graphsplit.FineGrained()}, opts...)...)
		require.NoError(t, err)
		vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithSolverFactory(sgd), WithWarmup(2, schedule.OneFOneB()))
		require.NoError(t, err)
		return m, vm
	}
	ctx := context.Background()
	root := t.TempDir()
	m, vm := build()
	defer vm.Close()
	d := makeData(m, n*(first+more), 4)
	for k := 0; k < first; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	dir, err := vm.Checkpoint(ctx, root, checkpoint.Manifest{Data: checkpoint.DataPosition{Epoch: 1, Index: first, Seed: 4}}, 0)
	require.NoError(t, err)
	for k := first; k < first+more; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	want := snapshot(t, m.LearnableValues())

	m2, vm2 := build()
	defer vm2.Close()
	man, err := vm2.Resume(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, int64(first), man.Data.Index)
	for k := first; k < first+more; k++ {
		_, err := vm2.Step(ctx, d.minibatch(t, m2.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm2.Flush(ctx))
	require.True(t, bitsEqual(want, m2.LearnableValues()), "resumed from disk, the run continues bit for bit")

	_, other := build(graphsplit.Stages(2))
	defer other.Close()
	_, err = other.Resume(ctx, dir)
	require.ErrorContains(t, err, "fingerprint")
}

// TestRestoreContinuesTheDelayCounts: the delay histograms a Save took are
// the ones Restore starts from, whatever the saved run did afterwards — also
// a replica's (the tied model's last stage) — so the restored run's report
// equals the uninterrupted run's.
func TestRestoreContinuesTheDelayCounts(t *testing.T) {
	const n, first, more = 2, 4, 4
	ctx := context.Background()
	build := func() (*testmodels.Model, *VM) {
		m, err := testmodels.Tied(tensor.Float64, 4, 1)
		require.NoError(t, err)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithSolverFactory(func(int) (gorgonia.Solver, error) {
			return solvers.NewMomentum(solvers.WithLearnRate(0.05), solvers.WithMomentum(0.9))
		}))
		require.NoError(t, err)
		return m, vm
	}
	m, vm := build()
	defer vm.Close()
	d := makeData(m, n*(first+more), 4)
	for k := 0; k < first; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	st, err := vm.Save(ctx)
	require.NoError(t, err)
	for k := first; k < first+more; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	want := vm.Report().PerStage

	m2, vm2 := build()
	defer vm2.Close()
	require.NoError(t, vm2.Restore(ctx, st))
	for k := first; k < first+more; k++ {
		_, err := vm2.Step(ctx, d.minibatch(t, m2.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm2.Flush(ctx))
	got := vm2.Report().PerStage
	shared := 0
	for i := range want {
		require.Equal(t, want[i].Delays, got[i].Delays, "stage %d's delays", i)
		require.Equal(t, want[i].SharedDelays, got[i].SharedDelays, "stage %d's shared reads' delays", i)
		shared += len(want[i].SharedDelays)
	}
	require.Positive(t, shared, "the tied model has a replica")
}
