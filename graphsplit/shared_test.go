package graphsplit

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// readersOf lists, from the stages' ops, which stages read learnable l.
func readersOf(plan *Plan, l *G.Node) []int {
	var out []int
	for _, st := range plan.Stages {
		for _, n := range st.Nodes {
			reads := false
			it := n.Graph().From(n.ID())
			for it != nil && it.Next() {
				reads = reads || it.Node().(*G.Node) == l
			}
			if reads {
				out = append(out, st.Index)
				break
			}
		}
	}
	return out
}

// checkShared checks the plan's record of shared learnables against the
// stages' ops: a learnable is shared exactly when ops of several stages
// read it, every reader lists it, the owner is the first reader, and the
// stages' Shared entries are Plan.Shared's.
func checkShared(t *testing.T, plan *Plan) {
	t.Helper()
	shared := map[*G.Node]*Shared{}
	for _, sh := range plan.Shared {
		require.Same(t, plan.Learnables[sh.Index], sh.Node)
		require.Equal(t, sh.Readers[0], sh.Owner)
		shared[sh.Node] = sh
	}
	for i, l := range plan.Learnables {
		readers := readersOf(plan, l)
		sh := shared[l]
		if len(readers) < 2 {
			require.Nil(t, sh, "%s is read by stages %v only", l.Name(), readers)
		} else {
			require.NotNil(t, sh, "%s is read by stages %v", l.Name(), readers)
			require.Equal(t, readers, sh.Readers, l.Name())
			require.Equal(t, readers[1:], sh.Replicas())
		}
		for _, s := range readers {
			st := plan.Stages[s]
			k := -1
			for q, li := range st.LearnableIndex {
				if li == i {
					k = q
				}
			}
			require.GreaterOrEqual(t, k, 0, "stage %d reads %s but does not list it", s, l.Name())
			require.Same(t, l, st.Learnables[k])
			require.Equal(t, sh, st.Shared[k])
			require.Equal(t, sh != nil && s != sh.Owner, st.Replica(k))
			require.Same(t, l.Value(), st.Train.Learnables[k].Value(), "a replica is bound to the user's tensor")
		}
	}
	for _, st := range plan.Stages {
		require.Len(t, st.Shared, len(st.Learnables))
		require.Len(t, st.Train.LearnableGrads, len(st.Learnables))
	}
}

// TestSharedLearnablesSplit: a tied embedding, a recurrence over 6 steps
// and a weight penalty used to keep the ops between a learnable's readers
// in one stage (86%, 92% and 92% of the cost in one stage for Stages(3),
// one or two stages for FineGrained). Their readers now share the
// learnable: Stages(3) gives three stages, none above 60% of the cost, and
// FineGrained one stage per layer — per op that applies a weight, the
// repeated ones included.
func TestSharedLearnablesSplit(t *testing.T) {
	for _, c := range []struct {
		build  testmodels.Builder
		layers int
		shared []string // learnables FineGrained shares
	}{
		{testmodels.Tied, 4, []string{"tied.E"}}, // embedding, fc1, fc2, projection by Eᵀ
		// Gates and candidate per step, head. The biases are read once,
		// by the Reshape that BroadcastAdd puts on them (one node, hash-
		// consed), whose value later steps read as an activation.
		{testmodels.GRU, 2*6 + 1, []string{"gru.gate.W", "gru.cand.W"}},
		{testmodels.Penalty, 3, []string{"penalty.fc1.W"}}, // fc1, fc2, fc3 with the penalty
	} {
		m, err := c.build(tensor.Float64, 4, 1)
		require.NoError(t, err)
		t.Run(m.Name, func(t *testing.T) {
			plan, err := Split(m.Graph, m.Cost, m.Learnables, Stages(3))
			require.NoError(t, err)
			require.Len(t, plan.Stages, 3)
			require.NotEmpty(t, plan.Shared)
			checkShared(t, plan)
			total := 0.0
			for _, st := range plan.Stages {
				total += st.Cost.Model
			}
			for _, st := range plan.Stages {
				require.LessOrEqual(t, st.Cost.Model/total, 0.6, "stage %d of %s\n%s", st.Index, m.Name, plan)
			}
			require.NoError(t, plan.Close())

			fine, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
			require.NoError(t, err)
			require.Len(t, fine.Stages, c.layers, "%s", fine)
			for _, st := range fine.Stages {
				weightOps := 0
				for _, n := range st.Nodes {
					if !fine.a.paramOnly(fine.a.pos[n]) && fine.a.appliesWeight(n) {
						weightOps++
					}
				}
				require.Equal(t, 1, weightOps, "stage %d of %s", st.Index, m.Name)
			}
			checkShared(t, fine)
			var names []string
			for _, sh := range fine.Shared {
				names = append(names, sh.Node.Name())
			}
			require.Equal(t, c.shared, names)
			require.NoError(t, fine.Close())
		})
	}
}

// TestCutInsideALearnablesSpanSharesIt: a square w read by the first and
// the last matmul; a cut between them puts w in both stages, and the
// summed contributions are the whole graph's gradient.
func TestCutInsideALearnablesSpanSharesIt(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
	G.WithName("h")(h)
	cost := G.Must(G.Mean(G.Must(G.Mul(h, w))))
	feeds := map[*G.Node]G.Value{x: tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0.1, -0.7, 0.3, 1.2, 0.5, -0.4}))}
	wantCost, wantGrads, err := reference(g, cost, G.Nodes{w}, feeds)
	require.NoError(t, err)
	for _, opts := range [][]Option{{CutAt("h")}, {FineGrained()}, {Stages(2)}} {
		plan, err := Split(g, cost, G.Nodes{w}, opts...)
		require.NoError(t, err)
		require.Len(t, plan.Stages, 2)
		require.Len(t, plan.Shared, 1)
		require.Equal(t, []int{0, 1}, plan.Shared[0].Readers)
		checkShared(t, plan)
		require.NoError(t, checkParity(t, plan, feeds, wantCost, wantGrads))
		require.NoError(t, plan.Close())
	}
}

// TestTableShowsSharedLearnables: the stage table gets a "shared" column
// when the plan shares learnables: the owner lists the stages that hold
// replicas, a replica its owner.
func TestTableShowsSharedLearnables(t *testing.T) {
	m, err := testmodels.Tied(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	defer plan.Close()
	lines := strings.Split(strings.TrimSpace(plan.String()), "\n")
	require.Len(t, lines, 1+len(plan.Stages), plan.String())
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[0]), "shared"), lines[0])
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[1]), "tied.E→3"), lines[1])
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[2]), "-"), lines[2])
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[4]), "tied.E←0"), lines[4])
	require.Contains(t, lines[4], "tied.E,tied.out.b")

	// No column for a plan without shared learnables.
	mlp, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	unshared, err := Split(mlp.Graph, mlp.Cost, mlp.Learnables, FineGrained())
	require.NoError(t, err)
	defer unshared.Close()
	require.NotContains(t, unshared.String(), "shared")
}

// TestSharedLearnablesInStashPrograms: a stage that holds a replica builds
// Stash programs with it, and running them gives the same contributions.
func TestSharedLearnablesInStashPrograms(t *testing.T) {
	m, err := testmodels.GRU(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, Stages(3))
	require.NoError(t, err)
	defer plan.Close()
	feeds := map[*G.Node]G.Value{}
	for i, v := range m.Batch(rand.New(rand.NewSource(4))) {
		feeds[m.Inputs[i]] = v
	}
	stashes := make([]*Keeping, len(plan.Stages))
	for s := range plan.Stages {
		if stashes[s], err = plan.NewKeeping(s); err != nil {
			t.Fatal(err)
		}
		require.Len(t, stashes[s].Backward.Learnables, len(plan.Stages[s].Learnables))
	}
	wantCost, wantGrads, err := reference(m.Graph, m.Cost, m.Learnables, feeds)
	require.NoError(t, err)
	c, grads, err := stagewiseWith(plan, feeds, stashes)
	require.NoError(t, err)
	require.LessOrEqual(t, testutil.RelErr(t, c, wantCost), 1e-12)
	for i := range grads {
		require.LessOrEqual(t, testutil.RelErr(t, grads[i], wantGrads[i]), 1e-12, m.Learnables[i].Name())
	}
}

// TestDOTDrawsReplicas: a replica is a node of the stage that holds it, so
// reading it crosses no stage boundary.
func TestDOTDrawsReplicas(t *testing.T) {
	m, err := testmodels.Tied(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := Split(m.Graph, m.Cost, m.Learnables, FineGrained())
	require.NoError(t, err)
	defer plan.Close()
	var dot strings.Builder
	require.NoError(t, plan.WriteDOT(&dot))
	e := plan.Learnables[0]
	require.Equal(t, "tied.E", e.Name())
	require.Contains(t, dot.String(), fmt.Sprintf("n%d_s3 [label=\"tied.E\\n(4, 16)\\nreplica of stage 0\"", e.ID()))
	require.Contains(t, dot.String(), fmt.Sprintf("n%d_s3 -> ", e.ID()))
	// Three boundaries, each crossed by one activation.
	require.Equal(t, 3, strings.Count(dot.String(), "color=red"), dot.String())
}
