package graphsplit

import (
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestSplitBackwardIsTheBackward runs, for every test model and dtype and
// every number of stages up to the finest plan, coarse and fine-grained
// cuts (with -short, fine-grained and one stage only), each stage's
// keeping backward and its split halves (Input, then Weight on what Input
// kept) on the same saved tensors and output gradients, and requires the
// same input and learnable gradients bit for bit. It counts the ops: each
// of the backward's ops runs in exactly one half, Weight runs some in
// every stage with a split, and Input runs fewer than the backward there:
// none that only the learnables' gradients need. A stage whose
// learnables' gradients read nothing of the microbatch has no split.
func TestSplitBackwardIsTheBackward(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine; go test ./... runs it")
	}
	forEachModel(t, func(t *testing.T, m *testmodels.Model, feeds map[*gorgonia.Node]gorgonia.Value) {
		fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
		require.NoError(t, err)
		split := 0
		for i := 2; i <= 2*len(fine.Stages)+1; i++ {
			p, cut := i/2, []Option{Stages(i / 2)} // coarse and fine-grained cuts
			if i%2 == 1 {
				cut = append(cut, FineGrained())
			} else if testing.Short() && p > 1 {
				continue // TestNewSynchronousSchedulesTrainLikeSequential splits coarse cuts too
			}
			plan, err := Split(m.Graph, m.Cost, m.Learnables, cut...)
			require.NoError(t, err)
			acts := make(map[int64]gorgonia.Value)
			for _, f := range plan.Feeds {
				acts[f.Key] = feeds[f.Node]
			}
			rng := rand.New(rand.NewSource(int64(p)))
			for s, st := range plan.Stages {
				k, sb, err := plan.NewSplitKeeping(s)
				require.NoError(t, err)
				in := make([]gorgonia.Value, len(st.Inputs))
				for i, pt := range st.Inputs {
					in[i] = acts[pt.Key]
				}
				fwd, err := k.Forward.Run(in, nil)
				require.NoError(t, err)
				for i, pt := range st.Outputs {
					acts[pt.Key] = fwd.Outputs[i]
				}
				og := make([]gorgonia.Value, len(st.Outputs))
				for i, ph := range k.Backward.OutputGrads {
					if ph != nil {
						og[i] = RandomValue(rng, ph.Dtype(), ph.Shape())
					}
				}
				want, err := k.Backward.Run(fwd.Kept, og)
				require.NoError(t, err)
				want, err = want.Clone()
				require.NoError(t, err)
				if sb == nil { // the learnables' gradients read nothing of the microbatch
					continue
				}
				ires, err := sb.Input.Run(fwd.Kept, og)
				require.NoError(t, err)
				require.Empty(t, ires.LearnableGrads)
				ires, err = ires.Clone()
				require.NoError(t, err)
				wres, err := sb.Weight.Run(ires.Kept, nil)
				require.NoError(t, err)
				require.Empty(t, wres.InputGrads)
				for i, g := range want.InputGrads {
					if g == nil {
						require.Nil(t, ires.InputGrads[i])
						continue
					}
					require.Equal(t, g.Data(), ires.InputGrads[i].Data(), "P=%d stage %d gradient of input %d", p, s, i)
				}
				require.Len(t, wres.LearnableGrads, len(want.LearnableGrads))
				for i, g := range want.LearnableGrads {
					require.Equal(t, g.Data(), wres.LearnableGrads[i].Data(), "P=%d stage %d gradient of %s", p, s, st.Learnables[i].Name())
				}
				nB, nI, nW := opCount(k.Backward), opCount(sb.Input), opCount(sb.Weight)
				require.Equal(t, nB, nI+nW, "P=%d stage %d: the halves' ops are the backward's", p, s)
				if len(st.Learnables) > 0 {
					require.Positive(t, nW, "P=%d stage %d: Weight computes the learnables' gradients", p, s)
					require.Less(t, nI, nB, "P=%d stage %d", p, s)
					split++
				}
			}
		}
		require.Positive(t, split)
	})
}

// opCount is the number of the program's ops (its guarded nodes).
func opCount(p *Program) int {
	n := 0
	for _, x := range p.Graph.AllNodes() {
		if _, ok := x.Op().(guardedOp); ok {
			n++
		}
	}
	return n
}

// RandomValue is a value of dtype dt and shape with normal entries from
// rng; a scalar is 1, a cost's gradient. It is exported for this
// package's external tests (its benchmarks).
func RandomValue(rng *rand.Rand, dt tensor.Dtype, shape tensor.Shape) gorgonia.Value {
	if shape.IsScalar() {
		v, err := scalarOne(dt)
		if err != nil {
			panic(err)
		}
		return v
	}
	t := tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
	switch d := t.Data().(type) {
	case []float64:
		for i := range d {
			d[i] = rng.NormFloat64()
		}
	case []float32:
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
	}
	return t
}
