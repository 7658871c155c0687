package graphsplit

import (
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"runtime/debug"

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
	// stubOnly makes SizeOf read a stub even for nodes of the stage (the
	// graph being built holds shape expressions only).
	stubOnly bool
	// subs and aux are the stage's substitutions and the extra nodes they
	// built, by original node (substitute.go).
	subs map[*gorgonia.Node]*substitution
	aux  map[*gorgonia.Node]gorgonia.Nodes
}

// newProgram rebuilds stage st; with train it adds the symbolic backward.
// Outputs that no input or learnable influences, and inputs with no path to
// an output, are found by gorgonia.Backpropagate; the stage is then rebuilt
// without them (removing nodes from a gorgonia graph corrupts its index).
//
// gradShapes gives, per activation key, the static shape of the gradient the
// consuming stages compute for it (see gradShapes in split.go).
func newProgram(a *analysis, st *Stage, train bool, gradShapes map[int64]tensor.Shape) (*Program, error) {
	p, err := draftProgram(a, st, train, gradShapes)
	if err != nil {
		return nil, err
	}
	if err := p.finish(p.origins(), a.unguarded); err != nil {
		return nil, err
	}
	return p, nil
}

// draftProgram builds stage st's graph, retrying without what the symbolic
// backward leaves out. The draft's ops are the user's own and gorgonia's
// backward ops, unguarded, and it reads nothing out: finish makes a
// program of it.
func draftProgram(a *analysis, st *Stage, train bool, gradShapes map[int64]tensor.Shape) (*Program, error) {
	var skip dropped
	for {
		p, err := buildProgram(a, st, train, skip, gradShapes)
		var more *dropped
		if !errors.As(err, &more) {
			return p, err
		}
		if !skip.add(more) {
			return nil, errors.Errorf("graphsplit: stage %d: symbolic backward keeps failing on the same nodes", st.Index)
		}
	}
}

// dropped lists what the symbolic backward of a stage leaves out.
type dropped struct {
	outputs, inputs map[int]bool
}

func (d *dropped) Error() string { return "graphsplit: nodes without gradient path" }

// add merges more into d and reports whether anything was new.
func (d *dropped) add(more *dropped) bool {
	if d.outputs == nil {
		d.outputs, d.inputs = map[int]bool{}, map[int]bool{}
	}
	grew := false
	for i := range more.outputs {
		grew = grew || !d.outputs[i]
		d.outputs[i] = true
	}
	for i := range more.inputs {
		grew = grew || !d.inputs[i]
		d.inputs[i] = true
	}
	return grew
}

func buildProgram(a *analysis, st *Stage, train bool, skip dropped, gradShapes map[int64]tensor.Shape) (p *Program, err error) {
	kind := "forward"
	if train {
		kind = "train"
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program: gorgonia panicked: %v\n%s", st.Index, kind, r, debug.Stack())
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
	p.local, p.aux = b.local, b.aux
	p.fwdCount = len(b.g.AllNodes())
	if train {
		if err := b.backward(p, skip, gradShapes); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// finish makes a program of a draft: it guards every op (seal; where names
// them for errors) and adds the Read nodes that deliver the outputs, the
// saved tensors and the gradients into the program's slots. Nothing may be
// added to the graph afterwards.
func (p *Program) finish(where map[*gorgonia.Node]string, unguarded bool) error {
	if err := p.seal(fmt.Sprintf("stage%d_%s", p.Stage, p.kind), where, unguarded); err != nil {
		return err
	}
	p.outSlot = make([]gorgonia.Value, len(p.Outputs))
	for i, o := range p.Outputs {
		gorgonia.Read(o, &p.outSlot[i])
	}
	p.keptSlot = make([]gorgonia.Value, len(p.Kept))
	for i, n := range p.Kept {
		gorgonia.Read(n, &p.keptSlot[i])
	}
	p.probeSlot = make([]gorgonia.Value, len(p.Probes))
	for i, n := range p.Probes {
		gorgonia.Read(n, &p.probeSlot[i])
	}
	if !p.HasBackward() {
		return nil
	}
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
	return nil
}

// node returns the local version of original node n, building it (and what
// it needs) on first use.
func (b *builder) node(n *gorgonia.Node) (*gorgonia.Node, error) {
	if l, ok := b.local[n]; ok {
		return l, nil
	}
	if l, done, err := b.substitute(n); done { // a stage op in place of the user's (substitute.go)
		return l, err
	}
	a := b.a
	var l *gorgonia.Node
	var err error
	switch {
	case isConstant(n):
		l = cloneConstant(n, b.g)
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
	op := n.Op()
	if from, to, ok := reshapeShapes(op); ok {
		op = copyReshape{from: from, to: to}
	}
	if l, err = gorgonia.ApplyOp(op, kids...); err != nil {
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
	if p, ok := b.a.pos[x]; ok && b.a.stageAt[p] == b.st.Index && !b.stubOnly {
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
		axis, err := reach.Int(n.Op(), "axis")
		if err != nil {
			return nil, errors.Wrapf(err, "SizeOf(%q): reading the op's axis", x.Name())
		}
		if axis < 0 || axis >= len(shape) {
			return nil, errors.Errorf("SizeOf(%q): axis %d of a shape %v", x.Name(), axis, shape)
		}
		small := make(tensor.Shape, len(shape))
		for i := range small {
			small[i] = 1
		}
		small[axis] = shape[axis]
		stub = gorgonia.NewConstant(tensor.New(tensor.WithShape(small...), tensor.Of(x.Dtype())),
			gorgonia.WithName(fmt.Sprintf("shape-of/%s/%d", x.Name(), axis)))
	}
	return applyOp(n, gorgonia.Nodes{b.g.AddNode(stub)})
}

// backward adds gradient placeholders for the outputs and the symbolic
// backward to the inputs and learnables, leaving out what skip lists. When
// gorgonia reports outputs or inputs without a gradient path it returns a
// *dropped naming them; a learnable without a gradient is an error.
//
// The placeholder for an output's gradient takes the static shape of the
// gradient node that its consumers compute, which is what the node feeding
// the same op's backward has in the whole graph. (Gorgonia's static and run
// time shapes can differ by unit dimensions, and its reductions give wrong
// results on some of those shapes, so the shapes must match the whole
// graph's, not only the sizes.)
func (b *builder) backward(p *Program, skip dropped, gradShapes map[int64]tensor.Shape) error {
	st := b.st
	p.OutputGrads = make(gorgonia.Nodes, len(p.Outputs))
	p.InputGrads = make(gorgonia.Nodes, len(p.Inputs))
	p.LearnableGrads = make(gorgonia.Nodes, len(p.Learnables))

	var wrt gorgonia.Nodes
	wrtIdx := make(map[*gorgonia.Node]int) // input index, or −1−learnable index
	for i, in := range st.Inputs {
		if in.Kind == Activation && isFloat(in.Dtype) && !skip.inputs[i] {
			wrt = append(wrt, p.Inputs[i])
			wrtIdx[p.Inputs[i]] = i
		}
	}
	for i, l := range p.Learnables {
		wrt = append(wrt, l)
		wrtIdx[l] = -1 - i
	}
	if len(wrt) == 0 {
		return b.checkLearnableGrads(p)
	}
	var outs, grads gorgonia.Nodes
	var outIdx []int
	for i, o := range p.Outputs {
		if !isFloat(o.Dtype()) || skip.outputs[i] {
			continue
		}
		shape := o.Shape()
		if gs, ok := gradShapes[st.Outputs[i].Key]; ok && gs.TotalSize() == shape.TotalSize() {
			shape = gs
		}
		ph := newInput(b.g, o.Dtype(), shape, fmt.Sprintf("stage%d/grad-out%d/%s", st.Index, i, st.Outputs[i].Name))
		outs, grads, outIdx = append(outs, o), append(grads, ph), append(outIdx, i)
	}
	if len(outs) == 0 || len(wrt) == 0 {
		return b.checkLearnableGrads(p)
	}
	res, err := gorgonia.Backpropagate(outs, grads, wrt)
	if err != nil {
		var sde gorgonia.SymDiffError
		if !errors.As(err, &sde) || len(sde.Nodes()) == 0 {
			return errors.Wrapf(err, "graphsplit: stage %d: symbolic backward failed", st.Index)
		}
		more := &dropped{outputs: map[int]bool{}, inputs: map[int]bool{}}
		for _, n := range sde.Nodes() {
			for k, o := range outs {
				if o == n {
					more.outputs[outIdx[k]] = true
				}
			}
			if i, ok := wrtIdx[n]; ok {
				if i < 0 {
					return errors.Errorf("graphsplit: stage %d: learnable %q receives no gradient from the cost (its only paths go through non-differentiable ops); drop it from the learnables", st.Index, st.Learnables[-1-i].Name())
				}
				more.inputs[i] = true
			}
		}
		if len(more.outputs)+len(more.inputs) == 0 {
			return errors.Wrapf(err, "graphsplit: stage %d: symbolic backward failed", st.Index)
		}
		return more
	}
	for k, gr := range res {
		if i := wrtIdx[wrt[k]]; i >= 0 {
			p.InputGrads[i] = gr
		} else {
			p.LearnableGrads[-1-i] = gr
		}
	}
	for k, i := range outIdx {
		p.OutputGrads[i] = grads[k]
	}
	return b.checkLearnableGrads(p)
}

func (b *builder) checkLearnableGrads(p *Program) error {
	for i, gr := range p.LearnableGrads {
		if gr == nil {
			return errors.Errorf("graphsplit: stage %d: learnable %q receives no gradient from the cost (its only paths go through non-differentiable ops); drop it from the learnables", b.st.Index, b.st.Learnables[i].Name())
		}
	}
	return nil
}

func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float64 || dt == tensor.Float32 }
