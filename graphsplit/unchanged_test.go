package graphsplit_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var update = flag.Bool("update", false, "rewrite testdata/plans.golden from the current code")

// TestPlansOfUnsharedModelsAreUnchanged describes the plans of every zoo and
// test model — none of them shares a learnable between stages — under the
// splitting options a user picks (one stage, Stages(2..4), FineGrained,
// FineGrained with Stages): the stage table, each stage's ops, ports and
// learnables, and the structure of its Forward and Train programs (every
// node's op, shape and children, in graph order). testdata/plans.golden was
// written by the code before learnables could be shared across stages and
// before ops were guarded, and rewritten once when a convolution's layer
// came to start at its im2col (so no stage sends patches; every stage's
// learnables stayed the same); the cuts and programs must stay exactly those.
// The programs are the user's ops re-applied (WithoutOpSubstitution): stage
// ops change the programs on purpose, not the cuts
// (TestOpSubstitutionKeepsTheCuts), nor any bit (substitute_test.go).
func TestPlansOfUnsharedModelsAreUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every zoo model")
	}
	type model struct {
		name       string
		g          *gorgonia.ExprGraph
		cost       *gorgonia.Node
		learnables gorgonia.Nodes
	}
	var models []model
	for _, r := range zoo.Recipes() {
		m, err := r.Build(r.Run.Microbatch, 1)
		require.NoError(t, err)
		fine, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
		require.NoError(t, err)
		shares := len(fine.Shared) > 0
		require.NoError(t, fine.Close())
		if shares { // the tied Transformer: its plans are new, tested in shared_test.go
			continue
		}
		models = append(models, model{"zoo/" + r.Model, m.Graph, m.Cost, m.Learnables})
	}
	for _, nb := range testmodels.All() {
		m, err := nb.Build(tensor.Float64, 4, 1)
		require.NoError(t, err)
		models = append(models, model{"testmodels/" + nb.Name, m.Graph, m.Cost, m.Learnables})
	}
	options := []struct {
		name string
		opts []graphsplit.Option
	}{
		{"one stage", nil},
		{"Stages(2)", []graphsplit.Option{graphsplit.Stages(2)}},
		{"Stages(3)", []graphsplit.Option{graphsplit.Stages(3)}},
		{"Stages(4)", []graphsplit.Option{graphsplit.Stages(4)}},
		{"FineGrained", []graphsplit.Option{graphsplit.FineGrained()}},
		{"FineGrained+Stages(2)", []graphsplit.Option{graphsplit.FineGrained(), graphsplit.Stages(2)}},
		{"FineGrained+Stages(3)", []graphsplit.Option{graphsplit.FineGrained(), graphsplit.Stages(3)}},
	}
	var b strings.Builder
	for _, m := range models {
		for _, o := range options {
			plan, err := graphsplit.Split(m.g, m.cost, m.learnables, append(o.opts, graphsplit.WithoutOpSubstitution())...)
			require.NoError(t, err, "%s %s", m.name, o.name)
			fmt.Fprintf(&b, "== %s, %s\n%s", m.name, o.name, plan)
			describePlan(&b, plan)
			require.NoError(t, plan.Close())
		}
	}
	path := filepath.Join("testdata", "plans.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "plans changed; if on purpose, rerun with -update and say why in the commit")
}

func describePlan(b *strings.Builder, plan *graphsplit.Plan) {
	for _, st := range plan.Stages {
		var ops []string
		for _, n := range st.Nodes {
			ops = append(ops, fmt.Sprintf("%s%v", n.Op(), n.Shape()))
		}
		fmt.Fprintf(b, "stage %d ops: %s\n", st.Index, strings.Join(ops, " "))
		fmt.Fprintf(b, "stage %d learnables: %v %v\n", st.Index, names(st.Learnables), st.LearnableIndex)
		for _, p := range st.Inputs {
			fmt.Fprintf(b, "stage %d in: %s\n", st.Index, port(p))
		}
		for _, p := range st.Outputs {
			fmt.Fprintf(b, "stage %d out: %s\n", st.Index, port(p))
		}
		fmt.Fprintf(b, "stage %d forward: %s\n", st.Index, structure(st.Forward))
		fmt.Fprintf(b, "stage %d train: %s\n", st.Index, structure(st.Train))
	}
}

func names(ns gorgonia.Nodes) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name())
	}
	return out
}

func port(p graphsplit.Port) string {
	return fmt.Sprintf("%s %v %v%v from %d to %v", p.Name, p.Kind, p.Dtype, p.Shape, p.Producer, p.Consumers)
}

// structure is the number of nodes of a program's graph and a digest of
// every node's op, shape and children (as positions in graph order), with
// which of them are the program's inputs, learnables, outputs and
// gradients.
func structure(p *graphsplit.Program) string {
	all := p.Graph.AllNodes()
	pos := make(map[*gorgonia.Node]int, len(all))
	for i, n := range all {
		pos[n] = i
	}
	h := sha256.New()
	for _, n := range all {
		op := "input " + n.Name()
		if n.Op() != nil {
			op = n.Op().String()
		}
		fmt.Fprintf(h, "%s %v %v <-", op, n.Type(), n.Shape())
		it := p.Graph.From(n.ID())
		for it != nil && it.Next() {
			fmt.Fprintf(h, " %d", pos[it.Node().(*gorgonia.Node)])
		}
		fmt.Fprintln(h)
	}
	for _, set := range []gorgonia.Nodes{p.Inputs, p.Learnables, p.Outputs, p.OutputGrads, p.InputGrads, p.LearnableGrads} {
		for _, n := range set {
			if n == nil {
				fmt.Fprint(h, " -")
				continue
			}
			fmt.Fprintf(h, " %d", pos[n])
		}
		fmt.Fprintln(h)
	}
	return fmt.Sprintf("%d nodes %x", len(all), h.Sum(nil)[:8])
}
