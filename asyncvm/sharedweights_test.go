package asyncvm

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestSharedWeightsTrainLikePlainGorgonia: on models that read a learnable
// in stages far apart — a tied-embedding decoder, a recurrence unrolled over
// time steps, a weight penalty in the cost — every synchronous schedule
// trains exactly like plain Gorgonia (float64 ≤ 1e-12 relative) for every
// P: the owner sums its replicas' gradients and sends them the new weights.
func TestSharedWeightsTrainLikePlainGorgonia(t *testing.T) {
	const n, steps = 2, 4
	for _, nb := range testmodels.SharedWeights() {
		ref, err := nb.Build(tensor.Float64, 4, 1)
		require.NoError(t, err)
		d := makeData(ref, n*steps, 7)
		want := plainTraining(t, ref, d, n, steps, momentum(0.05)(0))
		probe, err := nb.Build(tensor.Float64, 4, 1)
		require.NoError(t, err)
		fine, err := graphsplit.Split(probe.Graph, probe.Cost, probe.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		require.NotEmpty(t, fine.Shared, "%s shares a learnable across stages", nb.Name)
		for _, s := range []schedule.Schedule{schedule.Sequential(), schedule.GPipe(), schedule.OneFOneB()} {
			for p := 1; p <= len(fine.Stages); p++ {
				if testing.Short() && p != 2 && p != len(fine.Stages) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/P%d", nb.Name, s.Name, p), func(t *testing.T) {
					m, err := nb.Build(tensor.Float64, 4, 1)
					require.NoError(t, err)
					got, vm := pipelineTraining(t, m, d, n, steps,
						[]graphsplit.Option{graphsplit.FineGrained(), graphsplit.Stages(p)},
						WithSchedule(s), WithSolver(momentum(0.05)))
					defer vm.Close()
					for i := range got {
						require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), 1e-12, "learnable %s", m.Learnables[i].Name())
					}
				})
			}
		}
	}
}

// TestSharedWeightsAsyncIsDeterministic: PipeMare and PipeDream on the
// shared-weight models give bit-identical weights across runs and
// GOMAXPROCS, and each replica stage reports the delay its reads saw: the
// owner's.
func TestSharedWeightsAsyncIsDeterministic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, nb := range testmodels.SharedWeights() {
		for _, s := range []schedule.Schedule{schedule.PipeMare(), schedule.PipeDream()} {
			var first []gorgonia.Value
			for run, procs := range []int{1, 2, 1, 2} {
				runtime.GOMAXPROCS(procs)
				m, err := nb.Build(tensor.Float32, 4, 3)
				require.NoError(t, err)
				d := makeData(m, 2*6, 5)
				got, vm := pipelineTraining(t, m, d, 2, 6, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithSolver(momentum(0.05)))
				rep := vm.Report()
				plan := vm.Plan()
				require.NoError(t, vm.Close())
				if run == 0 {
					first = got
					replicas := 0
					for _, st := range plan.Stages {
						for i := range st.Learnables {
							if st.Replica(i) {
								replicas++
								// A replica's forward reads the version its owner's
								// forward of the same microbatch read, so the summed
								// gradient has one delay, the owner's: the delay T1
								// and T2 at the owner are told.
								owner := st.Shared[i].Owner
								require.NotEmpty(t, rep.PerStage[st.Index].SharedDelays, "%s %s: stage %d reports its shared reads' delays", nb.Name, s.Name, st.Index)
								require.Equal(t, rep.PerStage[owner].Delays, rep.PerStage[st.Index].SharedDelays, "%s %s: stage %d's reads of stage %d's learnable %s are as delayed as the owner's", nb.Name, s.Name, st.Index, owner, st.Learnables[i].Name())
							}
						}
					}
					require.Positive(t, replicas)
					continue
				}
				require.True(t, bitsEqual(first, got), "%s %s: run %d (GOMAXPROCS=%d) differs from run 0", nb.Name, s.Name, run, procs)
			}
		}
	}
}
