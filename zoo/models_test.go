package zoo

import (
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/stretchr/testify/require"
)

func TestModelsSplit(t *testing.T) {
	for _, c := range []struct {
		build  Builder
		stages int
	}{{MLP, 3}, {CNN, 4}, {ResNet, 15}, {Transformer, 20}, {TiedTransformer, 20}} {
		m, err := c.build(4, 1)
		require.NoError(t, err)
		plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		require.Len(t, plan.Stages, c.stages, m.Name)
		if m.Name == "transformer-tied" {
			require.Len(t, plan.Shared, 1, "the embedding is shared")
			require.Equal(t, []int{0, c.stages - 1}, plan.Shared[0].Readers, "by the first stage and the last")
		}
		t.Logf("%s\n%s", m.Name, plan)
	}
}
