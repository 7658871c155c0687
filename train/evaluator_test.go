package train

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/exectest"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestEvaluatorOnTheExecutor: the evaluator's whole graph in inference mode
// gives on the executor the logits the tape machine gives, chunk after
// chunk.
func TestEvaluatorOnTheExecutor(t *testing.T) {
	for _, r := range zoo.Recipes() {
		t.Run(r.Model, func(t *testing.T) {
			m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
			require.NoError(t, err)
			_, test, err := r.Load("embedded", 0)
			require.NoError(t, err)
			e, err := NewEvaluator(m)
			require.NoError(t, err)
			defer e.Close()
			for k := range 4 {
				idx := make([]int, m.Batch)
				for i := range idx {
					idx[i] = k*m.Batch + i
				}
				x, y := test.Batch(m, idx)
				require.NoError(t, gorgonia.Let(m.X, x))
				require.NoError(t, gorgonia.Let(m.Y, y))
				var logits [2]gorgonia.Value
				for i, run := range []func() error{e.prog.Run, e.prog.RunTape} {
					e.logits = nil
					require.NoError(t, run())
					logits[i] = e.logits.(tensor.Tensor).Clone().(gorgonia.Value)
				}
				exectest.SameBits(t, logits[1], logits[0], fmt.Sprintf("chunk %d", k))
			}
		})
	}
}

// TestPipelineEvaluatorIsTheGraphs: Train's evaluator, which runs the
// pipeline's forward programs on its stages in chunks of batches (4 here,
// so that a small test set spans several chunks), predicts every target
// of a test set as the evaluator of the whole graph does, on weights trained for a few steps (BatchNorm's
// running statistics among them), with a test set that ends in a partial
// chunk and a partial batch.
func TestPipelineEvaluatorIsTheGraphs(t *testing.T) {
	for _, model := range []string{"cnn", "transformer"} {
		t.Run(model, func(t *testing.T) {
			r, err := zoo.RecipeFor(model)
			require.NoError(t, err)
			ov := runspec.Spec{Model: model, Stages: "2", Method: "sequential"}
			trainSet, test, err := r.Load("embedded", 4*r.Run.Microbatch*r.Run.Microbatches)
			require.NoError(t, err)
			cfg, err := ConfigFor(ov, r, trainSet.Len())
			require.NoError(t, err)
			m, plan, err := cfg.Split(r.Build)
			require.NoError(t, err)
			ctx := t.Context()
			vm, err := cfg.newVM(ctx, plan, cfg.engine(4))
			require.NoError(t, err)
			defer vm.Close()
			_, err = vm.Run(ctx, zoo.Minibatches(trainSet, m, cfg.Microbatches, rand.New(rand.NewSource(1))))
			require.NoError(t, err)

			const chunk = 4
			n := 2*chunk*m.Batch + 3*m.Batch + 5
			if d, ok := test.(*zoo.Dataset); ok {
				require.Greater(t, d.Len(), n)
				test = d.Head(n)
			}
			graph, err := NewEvaluator(m)
			require.NoError(t, err)
			defer graph.Close()
			want, err := graph.Predictions(test)
			require.NoError(t, err)
			e := pipelineEvaluator(ctx, m, vm)
			e.chunk = chunk
			got, err := e.Predictions(test)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}
