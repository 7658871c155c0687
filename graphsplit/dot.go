package graphsplit

import (
	"fmt"
	"io"
	"strings"

	"gorgonia.org/gorgonia"
)

// WriteDOT writes the cut graph in Graphviz DOT: one cluster per stage with
// its ops and learnables (a replica of a shared learnable dashed, naming its
// owner), data inputs outside any cluster, and edges that cross a stage
// boundary drawn bold and labelled with the tensor's shape. Render it with
// `dot -Tsvg`.
func (p *Plan) WriteDOT(w io.Writer) error {
	var b strings.Builder
	id := func(n *gorgonia.Node) string { return fmt.Sprintf("n%d", n.ID()) }
	replicaID := func(l *gorgonia.Node, s int) string { return fmt.Sprintf("n%d_s%d", l.ID(), s) }
	stageOf := make(map[*gorgonia.Node]int)
	replica := make(map[*gorgonia.Node]map[int]bool) // learnable → stages with a replica
	b.WriteString("digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n")
	for _, f := range p.Feeds {
		fmt.Fprintf(&b, "  %s [label=%q, shape=ellipse];\n", id(f.Node), f.Name+"\n"+fmt.Sprint(f.Shape))
	}
	for _, s := range p.Stages {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%q;\n    style=rounded;\n", s.Index,
			fmt.Sprintf("stage %d (%d params)", s.Index, s.NumParams()))
		for i, l := range s.Learnables {
			label := l.Name() + "\n" + fmt.Sprint(l.Shape())
			if s.Replica(i) {
				if replica[l] == nil {
					replica[l] = make(map[int]bool)
				}
				replica[l][s.Index] = true
				fmt.Fprintf(&b, "    %s [label=%q, shape=ellipse, style=\"filled,dashed\", fillcolor=lightyellow];\n", replicaID(l, s.Index),
					label+fmt.Sprintf("\nreplica of stage %d", s.Shared[i].Owner))
				continue
			}
			stageOf[l] = s.Index
			fmt.Fprintf(&b, "    %s [label=%q, shape=ellipse, style=filled, fillcolor=lightyellow];\n", id(l), label)
		}
		for _, n := range s.Nodes {
			stageOf[n] = s.Index
			label := n.Op().String()
			if len(label) > 40 {
				label = label[:40] + "…"
			}
			fmt.Fprintf(&b, "    %s [label=%q];\n", id(n), label+"\n"+fmt.Sprint(n.Shape()))
		}
		b.WriteString("  }\n")
	}
	for _, s := range p.Stages {
		for _, n := range s.Nodes {
			it := n.Graph().From(n.ID())
			for it != nil && it.Next() {
				c := it.Node().(*gorgonia.Node)
				if replica[c][s.Index] {
					fmt.Fprintf(&b, "  %s -> %s;\n", replicaID(c, s.Index), id(n))
					continue
				}
				cs, inStage := stageOf[c]
				isFeed := false
				for _, f := range p.Feeds {
					isFeed = isFeed || f.Node == c
				}
				switch {
				case inStage && cs != s.Index:
					fmt.Fprintf(&b, "  %s -> %s [penwidth=2.5, color=red, label=%q];\n", id(c), id(n), fmt.Sprint(c.Shape()))
				case inStage || isFeed:
					fmt.Fprintf(&b, "  %s -> %s;\n", id(c), id(n))
				}
			}
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
