package asyncvm

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestAsyncIsDeterministic trains with PipeMare and PipeDream twice on
// GOMAXPROCS=1 and twice on 2 and requires bit-identical weights: results
// depend on the action lists only.
func TestAsyncIsDeterministic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, nb := range []testmodels.NamedBuilder{{Name: "resnet", Build: testmodels.ResNet}, {Name: "cnn", Build: testmodels.CNN}} {
		for _, s := range []schedule.Schedule{schedule.PipeMare(), schedule.PipeDream()} {
			var first []gorgonia.Value
			for run, procs := range []int{1, 2, 1, 2} {
				runtime.GOMAXPROCS(procs)
				m, err := nb.Build(tensor.Float32, 4, 3)
				require.NoError(t, err)
				d := makeData(m, 3*6, 5)
				got, vm := pipelineTraining(t, m, d, 3, 6, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithSolver(momentum(0.05)))
				require.NoError(t, vm.Close())
				if run == 0 {
					first = got
					continue
				}
				require.True(t, bitsEqual(first, got), "%s %s: run %d (GOMAXPROCS=%d) differs from run 0", nb.Name, s.Name, run, procs)
			}
		}
	}
}

// TestMeasuredDelaysMatchTheFormula checks the delay each forward saw,
// measured by the engine, against τ_i = ceil((2(P−1−i)+1)/N): every forward
// sees τ_i or one less and some see τ_i; backwards read the forward's
// version under PipeDream and the current one under PipeMare.
func TestMeasuredDelaysMatchTheFormula(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, s := range []schedule.Schedule{schedule.PipeMare(), schedule.PipeDream(), schedule.OneFOneB()} {
			t.Run(fmt.Sprintf("%s/N%d", s.Name, n), func(t *testing.T) {
				m, err := testmodels.ResNet(tensor.Float64, 2, 1)
				require.NoError(t, err)
				steps := schedule.Delay(8, n, 0) + 6 // past the warm-up of stage 0
				d := makeData(m, n*steps, 2)
				_, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithSolver(momentum(0.01)))
				defer vm.Close()
				rep := vm.Report()
				p := rep.Stages
				require.Equal(t, 8, p)
				for i, sr := range rep.PerStage {
					total := 0
					for _, c := range sr.Delays {
						total += c
					}
					require.Equal(t, n*steps, total, "stage %d: every forward's delay is recorded", i)
					if !s.Async {
						require.Equal(t, map[int]int{0: n * steps}, sr.Delays, "stage %d", i)
						continue
					}
					tau := schedule.Delay(p, n, i)
					require.Equal(t, tau, sr.FormulaDelay)
					for delay := range sr.Delays {
						// The first minibatches of the pipeline see less: their
						// forwards ran before any update.
						require.LessOrEqual(t, delay, tau, "stage %d delays %v", i, sr.Delays)
					}
					require.Positive(t, sr.Delays[tau], "stage %d never sees τ=%d: %v", i, tau, sr.Delays)
					// After the warm-up, only τ and τ−1.
					steady := 0
					for delay, c := range sr.Delays {
						if delay == tau || delay == tau-1 {
							steady += c
						}
					}
					require.GreaterOrEqual(t, steady, n*steps-schedule.Ahead(p, i), "stage %d delays %v", i, sr.Delays)
					if s.StashWeights {
						require.Equal(t, map[int]int{0: n * steps}, sr.BackwardLag, "PipeDream backwards read the forward's weights")
						require.LessOrEqual(t, sr.PeakWeightVersions, tau+1)
					} else {
						require.Equal(t, sr.Delays, sr.BackwardLag, "PipeMare backwards read the current weights")
						require.Zero(t, sr.Memory.StashedWeights)
					}
				}
			})
		}
	}
}

// TestPipeDreamComputesDelayedGradients checks PipeDream's semantics against
// an independent computation: each microbatch's gradient is the whole
// graph's gradient on the weights each stage had at that microbatch's
// forward (version from the action lists), and update k of every stage
// applies the mean over minibatch k.
func TestPipeDreamComputesDelayedGradients(t *testing.T) {
	const n, steps = 2, 8
	for _, nb := range []testmodels.NamedBuilder{{Name: "mlp", Build: testmodels.MLP}, {Name: "resnet", Build: testmodels.ResNet}} {
		t.Run(nb.Name, func(t *testing.T) {
			m, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			d := makeData(m, n*steps, 3)
			got, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.PipeDream()), WithSolver(momentum(0.05)))
			plan := vm.Plan()
			p := len(plan.Stages)
			require.NoError(t, vm.Close())

			ref, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			want := delayedReference(t, ref, plan, d, n, steps, listVersions(schedule.PipeDream().Actions(p, n, steps)))
			for i := range got {
				require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), 1e-12, "learnable %s", ref.Learnables[i].Name())
			}
		})
	}
}

// TestPipeDream2BWAppliesEveryGradientOneUpdateLate checks PipeDream-2BW
// against the same independent computation with its rule — step k's
// gradients are computed on the weights after update k−1, at every stage —
// checks that every forward after the first step saw a delay of exactly
// one, that a stage keeps one weight copy, and that too few microbatches
// are refused.
func TestPipeDream2BWAppliesEveryGradientOneUpdateLate(t *testing.T) {
	const steps = 7
	for _, nb := range []testmodels.NamedBuilder{{Name: "mlp", Build: testmodels.MLP}, {Name: "resnet", Build: testmodels.ResNet}} {
		t.Run(nb.Name, func(t *testing.T) {
			probe, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			fine, err := graphsplit.Split(probe.Graph, probe.Cost, probe.Learnables, graphsplit.FineGrained())
			require.NoError(t, err)
			p := len(fine.Stages)
			n := schedule.MinN(schedule.PipeDream2BW(), p)
			_, err = New(fine, WithMicrobatches(n-1), WithSchedule(schedule.PipeDream2BW()))
			require.ErrorContains(t, err, fmt.Sprintf("needs at least %d microbatches per minibatch", n))

			m, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			d := makeData(m, n*steps, 3)
			got, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.PipeDream2BW()), WithSolver(momentum(0.05)))
			rep := vm.Report()
			plan := vm.Plan()
			require.NoError(t, vm.Close())
			for i, sr := range rep.PerStage {
				require.Equal(t, map[int]int{0: n, 1: n * (steps - 1)}, sr.Delays, "stage %d: the first step reads the initial weights, every later one a delay of one", i)
				require.Equal(t, plan.Stages[i].Cost.ParamBytes, sr.Memory.StashedWeights, "stage %d keeps one copy", i)
			}
			ref, err := nb.Build(tensor.Float64, 4, 1)
			require.NoError(t, err)
			want := delayedReference(t, ref, plan, d, n, steps, func(_, m int) int { return max(0, m/n-1) })
			for i := range got {
				require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), 1e-12, "learnable %s", ref.Learnables[i].Name())
			}
		})
	}
}

// listVersions is, per stage and microbatch, how many updates the stage
// ran before the microbatch's forward in lists: the version PipeDream's
// forward reads.
func listVersions(lists [][]schedule.Action) func(stage, m int) int {
	version := make([]map[int]int, len(lists))
	for s, list := range lists {
		version[s] = map[int]int{}
		u := 0
		for _, a := range list {
			switch a.Op {
			case schedule.OpUpdate:
				u++
			case schedule.OpForward:
				version[s][a.Micro] = u
			}
		}
	}
	return func(s, m int) int { return version[s][m] }
}

// delayedReference trains ref (the same model as plan's, unsplit) so that
// microbatch m's gradient is computed on the weights of version(s, m) at
// every stage s, forward and backward alike.
func delayedReference(t *testing.T, ref *testmodels.Model, plan *graphsplit.Plan, d data, n, steps int, version func(stage, m int) int) []gorgonia.Value {
	stageOf := make([]int, len(ref.Learnables))
	for _, st := range plan.Stages {
		for _, li := range st.LearnableIndex {
			stageOf[li] = st.Index
		}
	}
	grads, err := gorgonia.Grad(ref.Cost, ref.Learnables...)
	require.NoError(t, err)
	gv := make([]gorgonia.Value, len(grads))
	for i, g := range grads {
		gorgonia.Read(g, &gv[i])
	}
	machine := gorgonia.NewTapeMachine(ref.Graph)
	defer machine.Close()
	live := ref.LearnableValues()
	history := [][]gorgonia.Value{snapshot(t, live)} // history[v]: weights after v updates
	acc := make([]*tensor.Dense, len(live))
	model := make([]gorgonia.ValueGrad, len(live))
	for i, l := range ref.Learnables {
		acc[i] = tensorutil.Zeros(l.Dtype(), l.Shape())
		model[i] = &valueGrad{name: l.Name(), value: live[i], grad: acc[i]}
	}
	solver := momentum(0.05)(0)
	for k := 0; k < steps; k++ {
		for j := 0; j < n; j++ {
			mb := k*n + j
			for i, l := range ref.Learnables {
				require.NoError(t, gorgonia.Let(l, history[version(stageOf[i], mb)][i]))
			}
			for i, in := range ref.Inputs {
				v, err := tensorutil.Clone(d.micro[mb][i])
				require.NoError(t, err)
				require.NoError(t, gorgonia.Let(in, v))
			}
			machine.Reset()
			require.NoError(t, machine.RunAll())
			for i, g := range gv {
				require.NoError(t, tensorutil.AddInto(acc[i], g))
			}
		}
		for i, l := range ref.Learnables {
			require.NoError(t, gorgonia.Let(l, live[i]))
			scaleInPlace(acc[i], 1/float64(n))
		}
		require.NoError(t, solver.Step(model))
		history = append(history, snapshot(t, live))
	}
	return history[steps]
}

func snapshot(t *testing.T, vs []gorgonia.Value) []gorgonia.Value {
	out := make([]gorgonia.Value, len(vs))
	for i, v := range vs {
		c, err := tensorutil.Clone(v)
		require.NoError(t, err)
		out[i] = c
	}
	return out
}

// TestStepThenRunContinuesThePipeline checks that feeding minibatches one by
// one (Step) or all at once (Run) gives the same weights: the schedule does
// not depend on how the data arrives.
func TestStepThenRunContinuesThePipeline(t *testing.T) {
	const n, steps = 2, 6
	build := func() (*testmodels.Model, data) {
		m, err := testmodels.MLP(tensor.Float64, 4, 1)
		require.NoError(t, err)
		return m, makeData(m, n*steps, 4)
	}
	m1, d := build()
	byStep, vm1 := pipelineTraining(t, m1, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(schedule.PipeMare()))
	require.NoError(t, vm1.Close())

	m2, _ := build()
	plan, err := graphsplit.Split(m2.Graph, m2.Cost, m2.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm2, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()))
	require.NoError(t, err)
	defer vm2.Close()
	var batches []map[*gorgonia.Node]gorgonia.Value
	for k := 0; k < steps; k++ {
		batches = append(batches, d.minibatch(t, m2.Inputs, k, n))
	}
	ctx := context.Background()
	losses, err := vm2.Run(ctx, batches[:4])
	require.NoError(t, err)
	require.Len(t, losses, 4)
	more, err := vm2.Run(ctx, batches[4:])
	require.NoError(t, err)
	require.Len(t, more, 2)
	require.NoError(t, vm2.Flush(ctx))
	require.True(t, bitsEqual(byStep, m2.LearnableValues()))
}
