package graphsplit

import (
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestTopologyOfATiedEmbedding: the tied model cut per layer is a chain of
// four stages (embedding, fc1, fc2, projection by Eᵀ) whose last stage
// replicates the embedding stage 0 owns; the topology is the chain plus
// that ownership, and the links carry the tensors each producer lists for
// its consumer.
func TestTopologyOfATiedEmbedding(t *testing.T) {
	m, err := testmodels.Tied(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	defer plan.Close()
	require.Len(t, plan.Stages, 4)
	require.Equal(t, schedule.Topology{
		Producers: [][]int{nil, {0}, {1}, {2}},
		Consumers: [][]int{{1}, {2}, {3}, nil},
		Owners:    [][]int{nil, nil, nil, {0}},
		Replicas:  [][]int{{3}, nil, nil, nil},
	}, plan.Topology())
	for i, st := range plan.Stages {
		_, cons := plan.Links(i)
		for _, l := range cons {
			prod, _ := plan.Links(l.Peer)
			require.Contains(t, prod, Link{Peer: i, Keys: l.Keys}, "stage %d's consumer %d lists the same link", i, l.Peer)
			for _, k := range l.Keys {
				found := false
				for _, o := range st.Outputs {
					found = found || o.Key == k
				}
				require.True(t, found, "stage %d sends key %d it outputs", i, k)
			}
		}
	}
}
