package graphsplit

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// TestParity runs every test model stage by stage for every P from 1 to its
// finest cut, balanced over layer boundaries and over all legal cuts, and
// compares cost and gradients with the whole graph (float64 ≤ 1e-12
// relative, float32 ≤ 1e-6).
func TestParity(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	forEachModel(t, func(t *testing.T, m *testmodels.Model, feeds map[*gorgonia.Node]gorgonia.Value) {
		fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
		require.NoError(t, err)
		finest := len(fine.Stages)
		require.GreaterOrEqual(t, finest, 2, "fine-grained split of %s", m.Name)
		fine.Close()
		a, err := analyze(m.Graph, m.Cost, m.Learnables)
		require.NoError(t, err)
		maxP := len(a.seq)

		wantCost, wantGrads, err := reference(m.Graph, m.Cost, m.Learnables, feeds)
		require.NoError(t, err)
		for p := 1; p <= finest; p++ {
			for _, opts := range [][]Option{{FineGrained(), Stages(p)}, {Stages(p)}} {
				plan, err := Split(m.Graph, m.Cost, m.Learnables, opts...)
				require.NoError(t, err)
				require.Len(t, plan.Stages, p)
				require.NoError(t, checkParity(t, plan, feeds, wantCost, wantGrads))
				plan.Close()
			}
		}
		// The finest balanced cut, one op per stage where legal.
		plan, err := Split(m.Graph, m.Cost, m.Learnables, Stages(maxP))
		require.NoError(t, err)
		require.NoError(t, checkParity(t, plan, feeds, wantCost, wantGrads))
		plan.Close()
	})
}
