package graphsplit_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/exectest"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestExecutorComputesWhatTheTapeComputes: every program of every test
// model's stages (forward, train, keeping forward and backward; with and
// without the stage ops; float32 and float64) gives, on the executor, the
// bits gorgonia's tape machine gives for the same graph and inputs, at
// every run — the executor's buffers from earlier runs reused, on new data
// — BatchNorm's running statistics included.
func TestExecutorComputesWhatTheTapeComputes(t *testing.T) {
	for _, nb := range append(testmodels.All(), testmodels.SharedWeights()...) {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, subs := range []bool{true, false} {
				if testing.Short() && dt == tensor.Float64 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/stageops=%v", nb.Name, dt, subs), func(t *testing.T) {
					m, err := nb.Build(dt, 4, 1)
					require.NoError(t, err)
					runBatches(t, exectest.New(t, m.Graph, m.Cost, m.Learnables, subs, 5), m, 4)
				})
			}
		}
	}
}

// runBatches runs n of m's batches, drawn from seed 5, through pipe: every
// program on the executor and on the tape, the same bits required.
func runBatches(t *testing.T, pipe *exectest.Pipeline, m *testmodels.Model, n int) {
	t.Helper()
	rng := rand.New(rand.NewSource(5))
	for range n {
		batch := m.Batch(rng)
		feeds := make(map[*gorgonia.Node]gorgonia.Value)
		for i, in := range m.Inputs {
			feeds[in] = batch[i]
		}
		pipe.Run(t, feeds)
	}
}
