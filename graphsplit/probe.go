package graphsplit

import (
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Locate returns the node of the user's graph with the given key (its ID,
// as in Port.Key) and the stage that computes it; the stage is −1 for a
// data input, a learnable, a constant or a node the cost does not need.
func (p *Plan) Locate(key int64) (*gorgonia.Node, int) {
	for _, n := range p.a.seq {
		if n.ID() == key {
			return n, p.a.stage(n)
		}
	}
	for _, n := range p.a.g.AllNodes() {
		if n.ID() == key {
			return n, -1
		}
	}
	return nil, -1
}

// NewProbe builds a forward program of stage s that also reads nodes, op
// nodes of the user's graph that the stage computes: Result.Probes holds
// their values, parallel to nodes. It is how a runtime reads a prediction,
// or any other node, during an evaluation.
func (p *Plan) NewProbe(s int, nodes gorgonia.Nodes) (prog *Program, err error) {
	if s < 0 || s >= len(p.Stages) {
		return nil, errors.Errorf("graphsplit: NewProbe(%d): the plan has %d stages", s, len(p.Stages))
	}
	for _, n := range nodes {
		if n == nil {
			return nil, errors.Errorf("graphsplit: NewProbe(%d): nil node", s)
		}
		if at := p.a.stage(n); at != s {
			if at < 0 {
				return nil, errors.Errorf("graphsplit: node %q is not computed by any stage (a data input, a learnable, or not needed by the cost): read it from your own data", n.Name())
			}
			return nil, errors.Errorf("graphsplit: node %q is computed by stage %d, not %d", n.Name(), at, s)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, errors.Errorf("graphsplit: stage %d probe program: gorgonia panicked: %v", s, r)
		}
	}()
	prog, err = buildProgram(p.a, p.Stages[s], false, dropped{}, nil)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		prog.Probes = append(prog.Probes, prog.local[n])
	}
	if err := prog.finish(prog.origins(), p.a.unguarded); err != nil {
		return nil, err
	}
	return prog, nil
}
