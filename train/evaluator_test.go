package train

import (
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/internal/exectest"
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
