package graphsplit

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// TestStashProgramsMatchRecompute runs each stage's keeping programs (forward
// saving tensors, backward reading them) and its Train program
// (recomputing) on the same inputs and output gradients, for every model, P
// and dtype, and requires the same gradients. Every stage of the test models
// has them (BatchNorm and MaxPool are stage ops without state); without op
// substitution the stages with BatchNorm or MaxPool are refused.
func TestStashProgramsMatchRecompute(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	forEachModel(t, func(t *testing.T, m *testmodels.Model, feeds map[*gorgonia.Node]gorgonia.Value) {
		dt := m.Dtype
		wantCost, wantGrads, err := reference(m.Graph, m.Cost, m.Learnables, feeds)
		require.NoError(t, err)
		fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
		require.NoError(t, err)
		stashed := 0
		for p := 1; p <= len(fine.Stages); p++ {
			plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained(), Stages(p))
			require.NoError(t, err)
			stashes := make([]*Keeping, p)
			exact, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained(), Stages(p), WithoutOpSubstitution())
			require.NoError(t, err)
			for s, st := range plan.Stages {
				require.Equal(t, len(st.Stateful) == 0, exact.CanKeep(s))
				if len(st.Stateful) > 0 {
					_, err := exact.NewKeeping(s)
					require.ErrorContains(t, err, "stateful ops")
				}
				require.True(t, plan.CanKeep(s), "stage %d", s)
				stashes[s], err = plan.NewKeeping(s)
				require.NoError(t, err)
				stashed++
			}
			c, grads, err := stagewiseWith(plan, feeds, stashes)
			require.NoError(t, err)
			tol := tolerance(dt)
			require.LessOrEqual(t, testutil.RelErr(t, c, wantCost), tol)
			for i, g := range grads {
				require.LessOrEqual(t, testutil.RelErr(t, g, wantGrads[i]), tol, "P=%d gradient of %s", p, plan.Learnables[i].Name())
			}
		}
		require.Positive(t, stashed)
	})
}
