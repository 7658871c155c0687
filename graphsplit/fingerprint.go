package graphsplit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"strings"

	"gorgonia.org/gorgonia"
)

// Fingerprint identifies how the plan cut its model: the data inputs, and
// per stage its ops (kind, shape, dtype, in order), its inputs and outputs
// (the keys that name tensors across stages, shapes, dtypes) and its
// learnables (names, shapes, dtypes). Two processes that build the same
// model and split it the same way get the same fingerprint; one that built
// another model, or cut it elsewhere, does not. It is hex SHA-256.
func (p *Plan) Fingerprint() string {
	h := sha256.New()
	for _, part := range p.FingerprintParts() {
		fmt.Fprintln(h, part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FingerprintParts are the pieces of the fingerprint, "feeds …" then
// "stage i …", each with the SHA-256 of its description, so that two plans
// can say where they differ.
func (p *Plan) FingerprintParts() []string {
	var feeds strings.Builder
	for _, f := range p.Feeds {
		describePort(&feeds, f)
	}
	out := []string{fmt.Sprintf("feeds %d %s", len(p.Feeds), digest(feeds.String()))}
	for _, st := range p.Stages {
		var b strings.Builder
		for _, n := range st.Nodes {
			fmt.Fprintf(&b, "op %d %s %v %v %v\n", n.ID(), opKind(n), n.Op(), n.Shape(), n.Dtype())
		}
		for _, in := range st.Inputs {
			b.WriteString("in ")
			describePort(&b, in)
		}
		for _, o := range st.Outputs {
			b.WriteString("out ")
			describePort(&b, o)
		}
		for _, l := range st.Learnables {
			fmt.Fprintf(&b, "learnable %s %v %v\n", l.Name(), l.Shape(), l.Dtype())
		}
		out = append(out, fmt.Sprintf("stage %d: %d ops, %d learnables %s", st.Index, len(st.Nodes), len(st.Learnables), digest(b.String())))
	}
	return out
}

func describePort(b *strings.Builder, pt Port) {
	fmt.Fprintf(b, "%d %s %v %v %v %d %v\n", pt.Key, pt.Name, pt.Kind, pt.Shape, pt.Dtype, pt.Producer, pt.Consumers)
}

func opKind(n *gorgonia.Node) string {
	if n.Op() == nil {
		return "none"
	}
	return reach.TypeString(n.Op())
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
