package asyncvm_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestNewSynchronousSchedulesTrainLikeSequential trains every test model
// (float64 and float32) with the schedules whose backwards are split into
// I and W — ZB-H1 (a flush every step) and ZB-H2 (no flush, steps
// overlapping) — and those that place two stages on a worker —
// interleaved 1F1B (round robin) and ZB-V (V-shaped) — and requires the
// final weights to be bit for bit the ones sequential trains: at fine
// grain, the SHA-256 recorded for sequential in testdata/weights_sha256.json;
// where fine grain gives an odd number of stages, on a plan of one stage
// fewer, against sequential trained on that plan.
func TestNewSynchronousSchedulesTrainLikeSequential(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("dozens of trainings in a row; TestSplitBackwardUnderRace covers the race detector")
	}
	want := map[string]string{}
	b, err := os.ReadFile(goldenFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &want))
	for _, nb := range testmodels.All() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			seq := want[fmt.Sprintf("%s/%v/sequential", nb.Name, dt)]
			require.NotEmpty(t, seq, "%s/%v: no sequential run recorded", nb.Name, dt)
			p := fineStages(t, nb.Build, dt)
			for _, acts := range []asyncvm.Activations{asyncvm.Recompute, asyncvm.Keep} {
				// ref trains what the schedules must: sequential (at fine
				// grain, the recorded weights), or, keeping (which sequential
				// does not: it runs one stage at a time), 1F1B's unsplit
				// keeping backward.
				ref, want := schedule.Sequential(), map[int]string{p: seq} // stages → ref's weights
				if acts == asyncvm.Keep {
					ref, want = schedule.OneFOneB(), map[int]string{}
				}
				for _, s := range []schedule.Schedule{schedule.ZBH1(), schedule.ZBH2(), schedule.Interleaved(2), schedule.ZBV()} {
					q := p - p%s.Virtual()
					cut := graphsplit.Stages(q)
					if q == p && acts == asyncvm.Recompute {
						cut = graphsplit.FineGrained()
					}
					if _, ok := want[q]; !ok {
						want[q] = trainOnPlan(t, nb.Build, dt, splitRun(t, ref, acts), cut)
					}
					require.Equal(t, want[q], trainOnPlan(t, nb.Build, dt, splitRun(t, s, acts), cut), "%s/%v/%s (activations %d) on %d stages: not the weights %s trains", nb.Name, dt, s.Name, acts, q, ref.Name)
				}
			}
		}
	}
}

// splitRun trains with schedule s and Momentum, keeping or recomputing
// (acts); where s splits its backwards it then requires that every W ran
// the weight-gradient program (requireSplitPrograms).
func splitRun(t *testing.T, s schedule.Schedule, acts asyncvm.Activations) goldenRun {
	r := goldenRun{name: s.Name, opts: func(int) []asyncvm.Option {
		return []asyncvm.Option{asyncvm.WithSchedule(s), asyncvm.WithSolver(momentumSolver), asyncvm.WithActivations(acts)}
	}}
	if s.Split {
		r.check = func(vm *asyncvm.VM) { requireSplitPrograms(t, vm, s.Name) }
	}
	return r
}

// requireSplitPrograms requires that every W of vm's stages ran the
// weight-gradient program, recomputing or keeping, where the stage has
// one (graphsplit.Plan.NewSplitKeeping): none fell back to the whole
// backward at I.
func requireSplitPrograms(t *testing.T, vm *asyncvm.VM, sched string) {
	t.Helper()
	plan := vm.Plan()
	ran := asyncvm.WeightPrograms(vm)
	for s, got := range ran {
		want := 0
		if plan.CanKeep(s) {
			_, sb, err := plan.NewSplitKeeping(s)
			require.NoError(t, err)
			if sb != nil {
				want = goldenSteps * goldenN
			}
		}
		require.Equal(t, want, got, "%s: stage %d: the W's that ran the weight-gradient program", sched, s)
	}
}

// fineStages is the number of stages of the model's fine-grained cut.
func fineStages(t *testing.T, build testmodels.Builder, dt tensor.Dtype) int {
	m, err := build(dt, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	return len(plan.Stages)
}

// TestSplitBackwardUnderRace runs ZB-H2 on one model under the race
// detector too, recomputing (I recomputes the forward and runs the input
// gradient, W the weight gradient) and keeping (I and W run the two
// halves of the keeping backward), and checks that every W ran the
// weight-gradient program and what the report says of the split's
// memory: what is kept between I and W, none after a flush.
func TestSplitBackwardUnderRace(t *testing.T) {
	for _, acts := range []asyncvm.Activations{asyncvm.Recompute, asyncvm.Keep} {
		_, vm := trainFine(t, testmodels.MLP, schedule.ZBH2(), acts)
		rep := vm.Report()
		programs := asyncvm.WeightPrograms(vm)
		require.NoError(t, vm.Close())
		for i, sr := range rep.PerStage {
			if sr.Memory.Parameters > 0 {
				require.Positive(t, sr.Memory.DeferredGradients, "activations %d: stage %d keeps what W reads between I and W", acts, i)
				require.Equal(t, goldenSteps*goldenN, programs[i], "activations %d: stage %d: every W runs the weight-gradient program", acts, i)
			}
			require.Equal(t, goldenSteps*goldenN, sr.Backwards, "activations %d: stage %d: every W counts as a backward", acts, i)
		}
	}
}

// TestSplitBackwardWithSharedLearnables trains the models whose stages
// share learnables (replicas, read and summed across stages) with ZB-H1,
// ZB-H2 and ZB-V, keeping their activations and recomputing — I and W
// the backward's two halves, W reading the replicas I read — and requires
// 1F1B's weights, and that every W ran the weight-gradient program.
func TestSplitBackwardWithSharedLearnables(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("trainings in a row; TestSplitBackwardUnderRace covers the race detector")
	}
	for _, nb := range testmodels.SharedWeights() {
		p := fineStages(t, nb.Build, tensor.Float64)
		cut := graphsplit.Stages(p - p%2)
		for _, acts := range []asyncvm.Activations{asyncvm.Recompute, asyncvm.Keep} {
			want := trainOnPlan(t, nb.Build, tensor.Float64, splitRun(t, schedule.OneFOneB(), acts), cut)
			for _, s := range []schedule.Schedule{schedule.ZBH1(), schedule.ZBH2(), schedule.ZBV()} {
				require.Equal(t, want, trainOnPlan(t, nb.Build, tensor.Float64, splitRun(t, s, acts), cut), "%s/%s (activations %d): not the weights 1f1b trains", nb.Name, s.Name, acts)
			}
		}
	}
}

// TestSplitBackwardCountsBatchNormOnce trains the test CNN (BatchNorm)
// with ZB-H1 and ZB-H2, its stages recomputing — I runs the
// forward again before the input gradient — and requires BatchNorm's
// running statistics bit for bit those sequential leaves: the recomputed
// forward does not count a microbatch twice (the weights' hash does not
// cover the statistics).
func TestSplitBackwardCountsBatchNormOnce(t *testing.T) {
	stats := func(build testmodels.Builder, s schedule.Schedule) []float64 {
		m, vm := trainFine(t, build, s, asyncvm.Recompute)
		require.NoError(t, vm.Close())
		require.NotEmpty(t, m.BatchNorms)
		var out []float64
		for _, bn := range m.BatchNorms {
			mean, vari := bn.Stats()
			out = append(append(out, mean.Data().([]float64)...), vari.Data().([]float64)...)
		}
		return out
	}
	want := stats(testmodels.CNN, schedule.Sequential())
	for _, s := range []schedule.Schedule{schedule.ZBH1(), schedule.ZBH2()} {
		require.Equal(t, want, stats(testmodels.CNN, s), "%s: BatchNorm's running statistics", s.Name)
	}
}

// TestSplitBackwardFirstStageDefersItsWholeBackward: a recomputing first
// stage sends no input gradient, so its I runs nothing and keeps only its
// inputs and output gradients, and its W runs the whole backward: it
// keeps less between I and W than the input-gradient program would hand
// over (what a keeping first stage keeps), and every W still computes
// the weights' gradients.
func TestSplitBackwardFirstStageDefersItsWholeBackward(t *testing.T) {
	deferred := func(acts asyncvm.Activations) (asyncvm.Memory, int) {
		_, vm := trainFine(t, testmodels.CNN, schedule.ZBH1(), acts)
		defer vm.Close()
		return vm.Report().PerStage[0].Memory, asyncvm.WeightPrograms(vm)[0]
	}
	recomputing, programs := deferred(asyncvm.Recompute)
	keeping, _ := deferred(asyncvm.Keep)
	t.Logf("stage 0 between I and W: recomputing %d B (inputs kept %d B), keeping %d B", recomputing.DeferredGradients, recomputing.StashedActivation, keeping.DeferredGradients)
	require.Positive(t, recomputing.DeferredGradients)
	require.Less(t, recomputing.DeferredGradients, keeping.DeferredGradients)
	require.Equal(t, goldenSteps*goldenN, programs)
}

// trainFine trains build's float64 model, cut at fine grain, with
// schedule s and Momentum, keeping or recomputing (acts), for the golden
// steps; the caller closes the VM.
func trainFine(t *testing.T, build testmodels.Builder, s schedule.Schedule, acts asyncvm.Activations) (*testmodels.Model, *asyncvm.VM) {
	m, err := build(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := asyncvm.New(plan, asyncvm.WithMicrobatches(goldenN), asyncvm.WithSchedule(s),
		asyncvm.WithSolver(momentumSolver), asyncvm.WithActivations(acts))
	require.NoError(t, err)
	trainGoldenSteps(t, m, vm)
	return m, vm
}
