package graphsplit

import (
	"fmt"
	"reflect"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// builder rebuilds one stage of the original graph in a fresh graph.
type builder struct {
	a     *analysis
	st    *Stage
	g     *gorgonia.ExprGraph
	local map[*gorgonia.Node]*gorgonia.Node // original → this graph
}

// newProgram rebuilds stage st; with train it adds the symbolic backward.
func newProgram(a *analysis, st *Stage, train bool) (p *Program, err error) {
	kind := "forward"
	if train {
		kind = "train"
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program: gorgonia panicked: %v", st.Index, kind, r)
		}
	}()
	b := &builder{
		a: a, st: st,
		g:     gorgonia.NewGraph(gorgonia.WithGraphName(fmt.Sprintf("stage%d_%s", st.Index, kind))),
		local: make(map[*gorgonia.Node]*gorgonia.Node),
	}
	p = &Program{Stage: st.Index, Graph: b.g, kind: kind}
	for i, in := range st.Inputs {
		n := placeholder(b.g, in.Node, fmt.Sprintf("stage%d/in%d/%s", st.Index, i, in.Name))
		b.local[in.Node] = n
		p.Inputs = append(p.Inputs, n)
	}
	for i, l := range st.Learnables {
		n := placeholder(b.g, l, fmt.Sprintf("stage%d/param%d/%s", st.Index, i, l.Name()), gorgonia.WithValue(l.Value()))
		b.local[l] = n
		p.Learnables = append(p.Learnables, n)
		p.params = append(p.params, l.Value())
	}
	for _, n := range st.Nodes {
		if _, err := b.node(n); err != nil {
			return nil, err
		}
	}
	for _, o := range st.Outputs {
		p.Outputs = append(p.Outputs, b.local[o.Node])
	}
	if train {
		if err := b.backward(p); err != nil {
			return nil, err
		}
	}
	p.outSlot = make([]gorgonia.Value, len(p.Outputs))
	for i, o := range p.Outputs {
		gorgonia.Read(o, &p.outSlot[i])
	}
	if train {
		p.inGSlot = make([]gorgonia.Value, len(p.InputGrads))
		for i, gr := range p.InputGrads {
			if gr != nil {
				gorgonia.Read(gr, &p.inGSlot[i])
			}
		}
		p.parGSlot = make([]gorgonia.Value, len(p.LearnableGrads))
		for i, gr := range p.LearnableGrads {
			gorgonia.Read(gr, &p.parGSlot[i])
		}
	}
	return p, nil
}

// node returns the local version of original node n, building it (and what
// it needs) on first use.
func (b *builder) node(n *gorgonia.Node) (*gorgonia.Node, error) {
	if l, ok := b.local[n]; ok {
		return l, nil
	}
	a := b.a
	var l *gorgonia.Node
	var err error
	switch {
	case isConstant(n):
		l = n.CloneTo(b.g)
	case isSizeOf(n):
		l, err = b.sizeOf(n)
	case a.replicable[n] || a.stage(n) == b.st.Index:
		kids := a.children(n)
		local := make(gorgonia.Nodes, len(kids))
		for i, c := range kids {
			if local[i], err = b.node(c); err != nil {
				return nil, err
			}
		}
		l, err = applyOp(n, local)
	default:
		// Inputs and learnables are bound before any op is built, so this is
		// a bug in how the stage's inputs were collected.
		return nil, errors.Errorf("graphsplit: stage %d: node %q is neither computed in the stage nor one of its inputs", b.st.Index, n.Name())
	}
	if err != nil {
		return nil, errors.Wrapf(err, "graphsplit: stage %d", b.st.Index)
	}
	b.local[n] = l
	return l, nil
}

// applyOp re-applies the original node's own op object to local children.
func applyOp(n *gorgonia.Node, kids gorgonia.Nodes) (l *gorgonia.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("cannot re-apply op %v (%T) of node %q: it panicked: %v", n.Op(), n.Op(), n.Name(), r)
		}
	}()
	if l, err = gorgonia.ApplyOp(n.Op(), kids...); err != nil {
		return nil, errors.Wrapf(err, "cannot re-apply op %v (%T) of node %q", n.Op(), n.Op(), n.Name())
	}
	if !l.Shape().Eq(n.Shape()) && !(l.IsScalar() && n.IsScalar()) {
		return nil, errors.Errorf("re-applying op %v of node %q gave shape %v, the original has %v", n.Op(), n.Name(), l.Shape(), n.Shape())
	}
	return l, nil
}

// sizeOf rebuilds a SizeOf node. Its child is used if the stage has it;
// otherwise the op is applied to a small constant that has the child's size
// along the measured axis, so that no activation crosses stages just for its
// shape.
func (b *builder) sizeOf(n *gorgonia.Node) (*gorgonia.Node, error) {
	x := b.a.children(n)[0]
	if lx, ok := b.local[x]; ok {
		return applyOp(n, gorgonia.Nodes{lx})
	}
	if p, ok := b.a.pos[x]; ok && b.a.stageAt[p] == b.st.Index {
		lx, err := b.node(x)
		if err != nil {
			return nil, err
		}
		return applyOp(n, gorgonia.Nodes{lx})
	}
	shape := x.Shape()
	var stub *gorgonia.Node
	if shape.IsScalar() || len(shape) == 0 {
		v, err := scalarOne(x.Dtype())
		if err != nil {
			return nil, errors.Errorf("SizeOf(%q): %v", x.Name(), err)
		}
		stub = gorgonia.NewConstant(v)
	} else {
		f := reflect.ValueOf(n.Op()).FieldByName("axis")
		if !f.IsValid() || f.Int() < 0 || int(f.Int()) >= len(shape) {
			return nil, errors.Errorf("SizeOf(%q): cannot read the op's axis", x.Name())
		}
		small := make(tensor.Shape, len(shape))
		for i := range small {
			small[i] = 1
		}
		small[f.Int()] = shape[f.Int()]
		stub = gorgonia.NewConstant(tensor.New(tensor.WithShape(small...), tensor.Of(x.Dtype())),
			gorgonia.WithName(fmt.Sprintf("shape-of/%s/%d", x.Name(), f.Int())))
	}
	return applyOp(n, gorgonia.Nodes{b.g.AddNode(stub)})
}

// backward adds gradient placeholders for the outputs and the symbolic
// backward to the inputs and learnables. Outputs no input or learnable can
// influence, and inputs with no path to an output, are dropped (their entry
// stays nil); a learnable without a gradient is an error.
func (b *builder) backward(p *Program) error {
	st := b.st
	p.OutputGrads = make(gorgonia.Nodes, len(p.Outputs))
	p.InputGrads = make(gorgonia.Nodes, len(p.Inputs))
	p.LearnableGrads = make(gorgonia.Nodes, len(p.Learnables))

	type slot struct {
		kind int // 0 input, 1 learnable
		i    int
	}
	var outs, grads gorgonia.Nodes
	var outIdx []int
	for i, o := range p.Outputs {
		if !isFloat(o.Dtype()) {
			continue
		}
		ph := placeholder(b.g, o, fmt.Sprintf("stage%d/grad-out%d/%s", st.Index, i, st.Outputs[i].Name))
		outs, grads, outIdx = append(outs, o), append(grads, ph), append(outIdx, i)
	}
	var wrt gorgonia.Nodes
	var wrtSlot []slot
	for i, in := range st.Inputs {
		if in.Kind == Activation && isFloat(in.Dtype) {
			wrt, wrtSlot = append(wrt, p.Inputs[i]), append(wrtSlot, slot{0, i})
		}
	}
	for i, l := range p.Learnables {
		if isFloat(l.Dtype()) {
			wrt, wrtSlot = append(wrt, l), append(wrtSlot, slot{1, i})
		}
	}
	for len(outs) > 0 && len(wrt) > 0 {
		res, err := gorgonia.Backpropagate(outs, grads, wrt)
		if err == nil {
			for k, gr := range res {
				s := wrtSlot[k]
				if s.kind == 0 {
					p.InputGrads[s.i] = gr
				} else {
					p.LearnableGrads[s.i] = gr
				}
			}
			for k, i := range outIdx {
				p.OutputGrads[i] = grads[k]
			}
			break
		}
		var sde gorgonia.SymDiffError
		if !errors.As(err, &sde) || len(sde.Nodes()) == 0 {
			return errors.Wrapf(err, "graphsplit: stage %d: symbolic backward failed", st.Index)
		}
		bad := make(map[*gorgonia.Node]bool)
		for _, n := range sde.Nodes() {
			bad[n] = true
		}
		removed := false
		for k := 0; k < len(outs); k++ {
			if bad[outs[k]] {
				b.g.RemoveNode(grads[k])
				outs = append(outs[:k], outs[k+1:]...)
				grads = append(grads[:k], grads[k+1:]...)
				outIdx = append(outIdx[:k], outIdx[k+1:]...)
				k--
				removed = true
			}
		}
		for k := 0; k < len(wrt); k++ {
			if bad[wrt[k]] {
				wrt = append(wrt[:k], wrt[k+1:]...)
				wrtSlot = append(wrtSlot[:k], wrtSlot[k+1:]...)
				k--
				removed = true
			}
		}
		if !removed {
			return errors.Wrapf(err, "graphsplit: stage %d: symbolic backward failed", st.Index)
		}
	}
	for _, g := range grads { // outputs dropped because nothing was left to differentiate
		if g != nil && p.OutputGrads != nil {
			found := false
			for _, og := range p.OutputGrads {
				if og == g {
					found = true
				}
			}
			if !found {
				b.g.RemoveNode(g)
			}
		}
	}
	for i, gr := range p.LearnableGrads {
		if gr == nil {
			return errors.Errorf("graphsplit: stage %d: learnable %q receives no gradient from the cost (its only paths go through non-differentiable ops); drop it from the learnables", st.Index, st.Learnables[i].Name())
		}
	}
	return nil
}

func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float64 || dt == tensor.Float32 }
