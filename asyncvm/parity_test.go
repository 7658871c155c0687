package asyncvm

import (
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func momentum(lr float64) func(int) gorgonia.Solver {
	return func(int) gorgonia.Solver {
		return gorgonia.NewMomentum(gorgonia.WithLearnRate(lr), gorgonia.WithMomentum(0.9))
	}
}

// TestSynchronousSchedulesTrainLikePlainGorgonia trains every test model
// with Sequential, GPipe and 1F1B-flush for P = 1..finest and compares the
// weights after 5 minibatches of 3 microbatches with plain Gorgonia
// (float64 ≤ 1e-12 relative, float32 ≤ 1e-5).
func TestSynchronousSchedulesTrainLikePlainGorgonia(t *testing.T) {
	const n, steps = 3, 5
	for _, nb := range testmodels.All() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			ref, err := nb.Build(dt, 4, 1)
			require.NoError(t, err)
			d := makeData(ref, n*steps, 7)
			want := plainTraining(t, ref, d, n, steps, momentum(0.05)(0))
			probe, err := nb.Build(dt, 4, 1)
			require.NoError(t, err)
			fine, err := graphsplit.Split(probe.Graph, probe.Cost, probe.Learnables, graphsplit.FineGrained())
			require.NoError(t, err)
			finest := len(fine.Stages)
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			for _, s := range []schedule.Schedule{schedule.Sequential(), schedule.GPipe(), schedule.OneFOneB()} {
				for p := 1; p <= finest; p++ {
					if testing.Short() && p != 1 && p != finest {
						continue
					}
					t.Run(fmt.Sprintf("%s/%v/%s/P%d", nb.Name, dt, s.Name, p), func(t *testing.T) {
						m, err := nb.Build(dt, 4, 1)
						require.NoError(t, err)
						got, vm := pipelineTraining(t, m, d, n, steps,
							[]graphsplit.Option{graphsplit.FineGrained(), graphsplit.Stages(p)},
							WithSchedule(s), WithSolver(momentum(0.05)))
						defer vm.Close()
						for i := range got {
							require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), tol, "learnable %s", m.Learnables[i].Name())
						}
					})
				}
			}
		}
	}
}
