package asyncvm

import (
	"context"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testmodels"
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
				WithSchedule(schedule.PipeMare), WithSolver(momentum(0.05)), WithDelayLog())
			log := vm.DelayLog()
			require.NoError(t, vm.Close())

			m2, err := nb.Build(dt, 4, 1)
			require.NoError(t, err)
			plan, err := graphsplit.Split(m2.Graph, m2.Cost, m2.Learnables, graphsplit.FineGrained())
			require.NoError(t, err)
			x, err := NewInjected(plan, RecordedDelays(log), WithMicrobatches(n), WithSolver(momentum(0.05)))
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
	x, err := NewInjected(plan, FixedDelays{0, 0, 0}, WithMicrobatches(n), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer x.Close()
	for k := 0; k < steps; k++ {
		_, err := x.Step(context.Background(), d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	for i, v := range m.LearnableValues() {
		require.LessOrEqual(t, relErr(t, v, want[i]), 1e-12)
	}
}

func TestExponentialDelays(t *testing.T) {
	e := ExponentialDelays{MeanDelay: 3, Limit: 10, Seed: 1, N: 2}
	hist := map[int]int{}
	sum := 0
	for k := 0; k < 20000; k++ {
		d := e.Delay(1, 2*k)
		require.Equal(t, d, e.Delay(1, 2*k+1), "a step's forwards share a draw")
		require.GreaterOrEqual(t, d, 0)
		require.LessOrEqual(t, d, 10)
		hist[d]++
		sum += d
	}
	mean := float64(sum) / 20000
	require.InDelta(t, 2.7, mean, 0.2, "round(Exp(3)) truncated at 10 has mean ≈ 2.7")
	require.Greater(t, hist[0], hist[5], "exponential: small delays are more likely")
	require.Equal(t, e.Delay(1, 7), ExponentialDelays{MeanDelay: 3, Limit: 10, Seed: 1, N: 2}.Delay(1, 7), "reproducible")
	_, err := NewInjected(nil, e)
	require.Error(t, err)
	var none Delays
	m, err := testmodels.MLP(tensor.Float64, 2, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	_, err = NewInjected(plan, none)
	require.ErrorContains(t, err, "no delays")
}
