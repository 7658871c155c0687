package graphsplit

import (
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// unguarded builds the programs with the user's ops as they are, the way
// they were built before ops were guarded.
func unguarded() Option { return func(c *config) { c.unguarded = true } }

// TestGuardsChangeNoBit runs every test model's plans stage by stage, for
// every P (with -short: 1, 2 and the finest), recomputing and with Stash programs, once with guarded ops and
// once unguarded, from the same BatchNorm statistics: cost, gradients and
// the BatchNorm statistics the runs leave must be bit-identical.
func TestGuardsChangeNoBit(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	forEachModel(t, func(t *testing.T, m *testmodels.Model, feeds map[*G.Node]G.Value) {
		fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
		require.NoError(t, err)
		finest := len(fine.Stages)
		require.NoError(t, fine.Close())
		for p := 1; p <= finest; p++ {
			if testing.Short() && p > 2 && p < finest {
				continue // -short: one stage, two, the finest
			}
			var costs []G.Value
			var grads [][]G.Value
			var stats [][]uint64
			for _, opts := range [][]Option{{FineGrained(), Stages(p)}, {FineGrained(), Stages(p), unguarded()}} {
				plan, err := Split(m.Graph, m.Cost, m.Learnables, opts...)
				require.NoError(t, err)
				var stashes []*Keeping
				for s, st := range plan.Stages {
					require.NoError(t, st.Forward.Compile())
					require.NoError(t, st.Train.Compile())
					if len(st.Stateful) == 0 {
						if stashes == nil {
							stashes = make([]*Keeping, len(plan.Stages))
						}
						sh, err := plan.NewKeeping(s)
						require.NoError(t, err)
						require.NoError(t, sh.Forward.Compile())
						require.NoError(t, sh.Backward.Compile())
						stashes[s] = sh
					}
				}
				// Compiling reset the BatchNorm statistics: start both
				// runs from the same ones.
				for _, bn := range m.BatchNorms {
					mean, vari := bn.Stats()
					fill(mean, 0.25)
					fill(vari, 2)
				}
				for _, sh := range [][]*Keeping{nil, stashes} {
					c, g, err := stagewiseWith(plan, feeds, sh)
					require.NoError(t, err)
					costs, grads = append(costs, c), append(grads, g)
				}
				var st []uint64
				for _, bn := range m.BatchNorms {
					mean, vari := bn.Stats()
					st = append(append(st, bits(t, mean)...), bits(t, vari)...)
				}
				stats = append(stats, st)
				require.NoError(t, plan.Close())
			}
			half := len(costs) / 2
			for i := 0; i < half; i++ {
				require.Equal(t, bits(t, costs[i+half]), bits(t, costs[i]), "P=%d cost", p)
				for j := range grads[i] {
					require.Equal(t, bits(t, grads[i+half][j]), bits(t, grads[i][j]), "P=%d gradient of %s", p, m.Learnables[j].Name())
				}
			}
			require.Equal(t, stats[1], stats[0], "P=%d BatchNorm statistics", p)
		}
	})
}

func fill(t tensor.Tensor, v float64) {
	switch d := t.Data().(type) {
	case []float64:
		for i := range d {
			d[i] = v
		}
	case []float32:
		for i := range d {
			d[i] = float32(v)
		}
	}
}

// bits returns the bit patterns of v's elements (float32 elements widened
// exactly), for exact comparison.
func bits(t *testing.T, v G.Value) []uint64 {
	f := testutil.Floats(t, v)
	out := make([]uint64, len(f))
	for i, x := range f {
		out[i] = math.Float64bits(x)
	}
	return out
}

// TestGuardsKeepTheUsersOps: every op of a program is guarded, wraps the
// user's own op object (so BatchNorm's statistics are the ones of the
// user's op, which Stage.Stateful still lists), and keeps its type, shape,
// string and hash.
func TestGuardsKeepTheUsersOps(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 1)
	require.NoError(t, err)
	// The user's ops themselves: stage ops take the BatchNorms' place by
	// default (they are guarded too: substitute_test.go).
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained(), WithoutOpSubstitution())
	require.NoError(t, err)
	defer plan.Close()
	var bns []*G.BatchNormOp
	for _, st := range plan.Stages {
		for _, n := range st.Stateful {
			if bn, ok := n.Op().(*G.BatchNormOp); ok {
				bns = append(bns, bn)
			}
		}
	}
	require.Equal(t, m.BatchNorms, bns, "Stage.Stateful lists the user's BatchNorm ops")
	guardedBN := 0
	for _, st := range plan.Stages {
		for _, prog := range []*Program{st.Forward, st.Train} {
			guards := 0
			for _, n := range prog.Graph.AllNodes() {
				if n.Op() == nil || isConstant(n) || isSizeOf(n) || opTypeName(n.Op()) == "readOp" {
					continue
				}
				g, ok := n.Op().(guardedOp)
				require.True(t, ok, "stage %d %s: op %v (%T) is not guarded", st.Index, prog.kind, n.Op(), n.Op())
				guards++
				require.Equal(t, g.Op.Hashcode(), g.Hashcode())
				require.Equal(t, g.Op.String(), g.String())
				if bn, ok := g.Op.(*G.BatchNormOp); ok {
					require.Contains(t, m.BatchNorms, bn)
					guardedBN++
				}
			}
			require.Greater(t, guards, 0)
		}
	}
	require.Equal(t, 2*len(m.BatchNorms), guardedBN, "each BatchNorm op runs guarded in its stage's Forward and Train")

	// What TestGuardsChangeNoBit compares with: the user's ops as they are.
	plain, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained(), unguarded())
	require.NoError(t, err)
	defer plain.Close()
	for _, st := range plain.Stages {
		for _, n := range st.Train.Graph.AllNodes() {
			_, guarded := n.Op().(guardedOp)
			require.False(t, guarded)
		}
	}
}

// TestPanickingOpIsAnError: an op that panics in Do, in the forward or in
// the symbolic backward, makes Run return an error that names the stage,
// the op and the node, instead of ending the process from the tape
// machine's goroutine.
func TestPanickingOpIsAnError(t *testing.T) {
	for _, onForward := range []bool{true, false} {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
		w1 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w1"), G.WithInit(G.GlorotU(1)))
		w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
		op := diffOp{identityOp: identityOp{name: "panicking", panics: onForward}, panicGrad: !onForward}
		h, err := G.ApplyOpWithName(op, "the-panicking-node", G.Must(G.Mul(x, w1)))
		require.NoError(t, err)
		cost := G.Must(G.Mean(G.Must(G.Mul(h, w2))))
		plan, err := Split(g, cost, G.Nodes{w1, w2}, FineGrained())
		require.NoError(t, err)
		require.Len(t, plan.Stages, 2)
		st := plan.Stages[0]
		xv := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(rand.New(rand.NewSource(1)).Perm(6)))
		xf := tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float64))
		for i, v := range xv.Data().([]int) {
			xf.Data().([]float64)[i] = float64(v)
		}
		grad := tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float64))
		_, ferr := st.Forward.Run([]G.Value{xf}, nil)
		_, terr := st.Train.Run([]G.Value{xf}, []G.Value{grad})
		if !onForward {
			require.NoError(t, ferr)
		}
		for _, err := range []error{ferr, terr} {
			if err == nil {
				continue
			}
			var p *OpPanic
			require.True(t, errors.As(err, &p), "%v", err)
			require.Contains(t, err.Error(), "graphsplit: stage 0")
			if onForward {
				require.Contains(t, err.Error(), `op panicking of node "the-panicking-node" panicked: boom in panicking`)
			} else {
				require.Contains(t, err.Error(), `op panicking-gradient of the backward pass (towards the gradient of node`)
				require.Contains(t, err.Error(), "panicked: boom in panicking-gradient")
			}
			require.NotEmpty(t, p.Stack)
		}
		require.Error(t, terr)
		// The program stays usable: the next run fails the same way.
		_, again := st.Train.Run([]G.Value{xf}, []G.Value{grad})
		require.EqualError(t, again, terr.Error())
		require.NoError(t, plan.Close())
	}
}
