package asyncvm

import (
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestStashTrainsLikeRecompute trains every model with stashed activations
// (stateless stages skip the second forward; stateful ones still recompute)
// and requires plain Gorgonia's weights under 1F1B-flush and the same
// weights as recomputation under PipeDream, whose backward reads the
// forward's weights either way. (Under PipeMare they differ by design: see
// Activations.)
func TestStashTrainsLikeRecompute(t *testing.T) {
	const n, steps = 2, 4
	for _, nb := range testmodels.All() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 1e-5
			}
			t.Run(fmt.Sprintf("%s/%v", nb.Name, dt), func(t *testing.T) {
				ref, err := nb.Build(dt, 4, 1)
				require.NoError(t, err)
				d := makeData(ref, n*steps, 3)
				want := plainTraining(t, ref, d, n, steps, momentum(0.05)(0))
				m, err := nb.Build(dt, 4, 1)
				require.NoError(t, err)
				got, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()},
					WithSchedule(schedule.OneFOneB()), WithActivations(Keep), WithSolver(momentum(0.05)))
				rep := vm.Report()
				require.NoError(t, vm.Close())
				for i := range got {
					require.LessOrEqual(t, testutil.RelErr(t, got[i], want[i]), tol, "learnable %s", m.Learnables[i].Name())
				}
				require.Positive(t, rep.Memory.StashedActivation)

				for _, s := range []schedule.Schedule{schedule.PipeDream()} {
					m1, _ := nb.Build(dt, 4, 1)
					recompute, vm1 := pipelineTraining(t, m1, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithSolver(momentum(0.05)))
					require.NoError(t, vm1.Close())
					m2, _ := nb.Build(dt, 4, 1)
					stashed, vm2 := pipelineTraining(t, m2, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithActivations(Keep), WithSolver(momentum(0.05)))
					require.NoError(t, vm2.Close())
					for i := range recompute {
						require.LessOrEqual(t, testutil.RelErr(t, stashed[i], recompute[i]), tol, "%s learnable %s", s.Name, m.Learnables[i].Name())
					}
				}
			})
		}
	}
}
