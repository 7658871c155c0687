package asyncvm

import (
	"context"
	"testing"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestInjectionReplaysARealRun trains with the PipeMare engine, records the
// delay every forward saw, then replays those delays with Injected on a
// fresh copy of the model: the weights must be bit-identical.
func TestInjectionReplaysARealRun(t *testing.T) {
	const n, steps = 2, 10
	for _, nb := range []testmodels.NamedBuilder{{Name: "resnet", Build: testmodels.ResNet}, {Name: "cnn", Build: testmodels.CNN}} {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			m, err := nb.Build(dt, 4, 1)
			require.NoError(t, err)
			d := makeData(m, n*steps, 6)
			engine, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()},
				WithSchedule(schedule.PipeMare()), WithSolver(momentum(0.05)), WithDelayLog())
			log := vm.DelayLog()
			require.NoError(t, vm.Close())

			m2, err := nb.Build(dt, 4, 1)
			require.NoError(t, err)
			plan, err := graphsplit.Split(m2.Graph, m2.Cost, m2.Learnables, graphsplit.FineGrained())
			require.NoError(t, err)
			x, err := NewInjected(plan, delay.Recorded(log), WithMicrobatches(n), WithSolver(momentum(0.05)))
			require.NoError(t, err)
			for k := 0; k < steps; k++ {
				_, err := x.Step(context.Background(), d.minibatch(t, m2.Inputs, k, n))
				require.NoError(t, err)
			}
			require.NoError(t, x.Close())
			require.True(t, bitsEqual(engine, m2.LearnableValues()), "%s %v: injection must reproduce the engine's weights", nb.Name, dt)
			rep := x.Report()
			for i, sr := range rep.PerStage {
				require.Positive(t, sr.Delays[schedule.Delay(len(rep.PerStage), n, i)], "stage %d replayed τ", i)
			}
		}
	}
}

// TestInjectionWithZeroDelaysIsPlainTraining: with zero delays injection is
// plain sequential training (plain Gorgonia's weights).
func TestInjectionWithZeroDelaysIsPlainTraining(t *testing.T) {
	const n, steps = 2, 4
	ref, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	d := makeData(ref, n*steps, 2)
	want := plainTraining(t, ref, d, n, steps, momentum(0.05)(0))
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	x, err := NewInjected(plan, delay.Fixed{0, 0, 0}, WithMicrobatches(n), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer x.Close()
	for k := 0; k < steps; k++ {
		_, err := x.Step(context.Background(), d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	for i, v := range m.LearnableValues() {
		require.LessOrEqual(t, testutil.RelErr(t, v, want[i]), 1e-12)
	}
}

// TestNewInjectedRefusesWhatItCannotHonour: NewInjected runs the
// sequential schedule with recomputed activations and delays from the
// start, so it refuses the options that would change that, naming them.
func TestNewInjectedRefusesWhatItCannotHonour(t *testing.T) {
	_, err := NewInjected(nil, delay.Fixed{0})
	require.Error(t, err)
	m, err := testmodels.MLP(tensor.Float64, 2, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	var none delay.Source
	_, err = NewInjected(plan, none)
	require.ErrorContains(t, err, "no delays")
	for name, o := range map[string]Option{
		"WithSchedule":    WithSchedule(schedule.PipeMare()),
		"WithWarmup":      WithWarmup(2, schedule.OneFOneB()),
		"WithActivations": WithActivations(Keep),
	} {
		_, err := NewInjected(plan, delay.Fixed{1}, o)
		require.ErrorContains(t, err, "NewInjected cannot honour "+name)
	}
	_, err = NewInjected(plan, delay.Fixed{-1})
	require.ErrorContains(t, err, "stage 0: negative maximum delay")
}
