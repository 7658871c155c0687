package graphsplit

import (
	"fmt"
	"io"
	"strings"

	"gorgonia.org/gorgonia"
)

// WriteDOT writes the cut graph in Graphviz DOT: one cluster per stage with
// its ops and learnables, data inputs outside any cluster, and edges that
// cross a stage boundary drawn bold and labelled with the tensor's shape.
// Render it with `dot -Tsvg`.
func (p *Plan) WriteDOT(w io.Writer) error {
	var b strings.Builder
	id := func(n *gorgonia.Node) string { return fmt.Sprintf("n%d", n.ID()) }
	stageOf := make(map[*gorgonia.Node]int)
	b.WriteString("digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n")
	for _, f := range p.Feeds {
		fmt.Fprintf(&b, "  %s [label=%q, shape=ellipse];\n", id(f.Node), f.Name+"\n"+fmt.Sprint(f.Shape))
	}
	for _, s := range p.Stages {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%q;\n    style=rounded;\n", s.Index,
			fmt.Sprintf("stage %d (%d params)", s.Index, s.NumParams()))
		for _, l := range s.Learnables {
			stageOf[l] = s.Index
			fmt.Fprintf(&b, "    %s [label=%q, shape=ellipse, style=filled, fillcolor=lightyellow];\n", id(l), l.Name()+"\n"+fmt.Sprint(l.Shape()))
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
