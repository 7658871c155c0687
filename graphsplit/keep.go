package graphsplit

import (
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Keeping is a stage's pair of programs for running without recomputation:
// the forward also returns the tensors the backward reads (Result.Kept),
// and the backward reads those instead of recomputing the forward. It
// trades memory (the saved tensors of every microbatch in flight) for the
// time of a second forward pass.
//
// Only the stages for which CanKeep holds have one: an op that keeps state
// in its object between forward and backward (GroupNorm, AvgPool; BatchNorm
// and MaxPool with WithoutOpSubstitution) is exact with several
// microbatches in flight only when recomputed. A stage's BatchNorms and
// MaxPools are stage ops without state (WithoutOpSubstitution), whose
// statistics and argmax are among the kept tensors.
type Keeping struct {
	// Forward is the stage's forward program with Kept outputs.
	Forward *Program
	// Backward reads the saved tensors (Inputs, parallel to
	// Forward.Kept) and the output gradients (OutputGrads, parallel to
	// Stage.Outputs), and returns InputGrads (parallel to Stage.Inputs) and
	// LearnableGrads.
	Backward *Program
}

// NewKeeping builds the keeping programs of stage s. It refuses stages for
// which CanKeep is false. The programs are new: they share nothing with the stage's
// Forward and Train programs but the learnables' tensors.
func (p *Plan) NewKeeping(s int) (k *Keeping, err error) {
	if s < 0 || s >= len(p.Stages) {
		return nil, errors.Errorf("graphsplit: NewKeeping(%d): the plan has %d stages", s, len(p.Stages))
	}
	st := p.Stages[s]
	if !p.CanKeep(s) {
		return nil, errors.Errorf("graphsplit: stage %d has stateful ops (%s): only recomputation gives exact gradients there", s, statefulKinds(st))
	}
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, errors.Errorf("graphsplit: stage %d keeping programs: gorgonia panicked: %v\n%s", s, r, debug.Stack())
		}
	}()
	gradShapes := make(map[int64]tensor.Shape)
	for i, g := range st.Train.OutputGrads {
		if g != nil {
			gradShapes[st.Outputs[i].Key] = g.Shape()
		}
	}
	train, err := draftProgram(p.a, st, true, gradShapes)
	if err != nil {
		return nil, err
	}
	all := train.Graph.AllNodes()
	index := make(map[*gorgonia.Node]int, len(all))
	for i, n := range all {
		index[n] = i
	}
	orig := train.nodeOrigins()
	isParam := make(map[*gorgonia.Node]int)
	for i, l := range train.Learnables {
		isParam[l] = i
	}
	isGradIn := make(map[*gorgonia.Node]int)
	for i, g := range train.OutputGrads {
		if g != nil {
			isGradIn[g] = i
		}
	}

	// The backward: every node the gradients need that the forward did not
	// build. Forward nodes it reads are saved.
	bwd := make(map[*gorgonia.Node]bool)
	saved := make(map[*gorgonia.Node]bool)
	var walk func(n *gorgonia.Node)
	walk = func(n *gorgonia.Node) {
		if bwd[n] || saved[n] {
			return
		}
		if _, ok := isParam[n]; ok || isConstant(n) {
			return
		}
		if index[n] < train.fwdCount {
			saved[n] = true
			return
		}
		bwd[n] = true
		it := train.Graph.From(n.ID())
		for it != nil && it.Next() {
			walk(it.Node().(*gorgonia.Node))
		}
	}
	for _, g := range append(append(gorgonia.Nodes{}, train.InputGrads...), train.LearnableGrads...) {
		if g != nil {
			walk(g)
		}
	}
	var savedList, rebuilt, bwdList gorgonia.Nodes
	for n := range saved {
		o, ok := orig[n]
		switch {
		case !ok:
			return nil, errors.Errorf("graphsplit: stage %d: the backward reads forward node %q that no original node maps to", s, n.Name())
		case o.aux < 0 && p.a.replicable[o.node]:
			// Shape-only expressions (SizeOf …) are rebuilt, not saved:
			// ops read them as dimensions when they are built.
			rebuilt = append(rebuilt, n)
		default:
			savedList = append(savedList, n)
		}
	}
	for n := range bwd {
		bwdList = append(bwdList, n)
	}
	byIndex := func(ns gorgonia.Nodes) {
		sort.Slice(ns, func(i, j int) bool { return index[ns[i]] < index[ns[j]] })
	}
	byIndex(savedList)
	byIndex(rebuilt)
	byIndex(bwdList)

	// The backward program.
	g := gorgonia.NewGraph(gorgonia.WithGraphName(fmt.Sprintf("stage%d_backward", s)))
	back := &Program{Stage: s, Graph: g, kind: "backward"}
	local := make(map[*gorgonia.Node]*gorgonia.Node)
	for i, n := range savedList {
		ph := newInput(g, n.Dtype(), n.Shape(), fmt.Sprintf("stage%d/saved%d/%s", s, i, orig[n].name()))
		local[n] = ph
		back.Inputs = append(back.Inputs, ph)
	}
	for i, l := range st.Learnables {
		n := placeholder(g, l, fmt.Sprintf("stage%d/param%d/%s", s, i, l.Name()), gorgonia.WithValue(l.Value()))
		local[train.Learnables[i]] = n
		back.Learnables = append(back.Learnables, n)
		back.params = append(back.params, l.Value())
	}
	back.OutputGrads = make(gorgonia.Nodes, len(train.OutputGrads))
	for i, gr := range train.OutputGrads {
		if gr != nil {
			ph := newInput(g, gr.Dtype(), gr.Shape(), gr.Name())
			local[gr] = ph
			back.OutputGrads[i] = ph
		}
	}
	shapes := &builder{a: p.a, st: st, g: g, local: make(map[*gorgonia.Node]*gorgonia.Node), stubOnly: true}
	for _, n := range rebuilt {
		l, err := shapes.node(orig[n].node)
		if err != nil {
			return nil, err
		}
		local[n] = l
	}
	get := func(n *gorgonia.Node) (*gorgonia.Node, error) {
		if l, ok := local[n]; ok {
			return l, nil
		}
		if isConstant(n) {
			l := cloneConstant(n, g)
			local[n] = l
			return l, nil
		}
		return nil, errors.Errorf("graphsplit: stage %d backward: node %q is not available", s, n.Name())
	}
	for _, n := range bwdList {
		if _, ok := isGradIn[n]; ok {
			continue
		}
		var kids gorgonia.Nodes
		it := train.Graph.From(n.ID())
		for it != nil && it.Next() {
			k, err := get(it.Node().(*gorgonia.Node))
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		l, err := applyOp(n, kids)
		if err != nil {
			return nil, errors.Wrapf(err, "graphsplit: stage %d backward", s)
		}
		local[n] = l
	}
	back.InputGrads = make(gorgonia.Nodes, len(train.InputGrads))
	for i, gr := range train.InputGrads {
		if gr != nil {
			if back.InputGrads[i], err = get(gr); err != nil {
				return nil, err
			}
		}
	}
	back.LearnableGrads = make(gorgonia.Nodes, len(train.LearnableGrads))
	for i, gr := range train.LearnableGrads {
		if back.LearnableGrads[i], err = get(gr); err != nil {
			return nil, err
		}
	}
	trainWhere := train.origins()
	backWhere := make(map[*gorgonia.Node]string, len(local))
	for n, l := range local {
		backWhere[l] = trainWhere[n]
	}
	if err := back.finish(backWhere, p.a.unguarded); err != nil {
		return nil, err
	}

	// The forward program, saving what the backward reads.
	fwd, err := buildProgram(p.a, st, false, dropped{}, nil)
	if err != nil {
		return nil, err
	}
	for _, n := range savedList {
		l, ok := fwd.at(orig[n])
		if !ok {
			return nil, errors.Errorf("graphsplit: stage %d: saved node %q is not in the forward program", s, orig[n].name())
		}
		fwd.Kept = append(fwd.Kept, l)
	}
	if err := fwd.finish(fwd.origins(), p.a.unguarded); err != nil {
		return nil, err
	}
	return &Keeping{Forward: fwd, Backward: back}, nil
}

// Programs returns the pair of programs stage s runs for a forward and a
// backward: with keep and a stage for which CanKeep holds, its keeping
// programs (a new pair; kept is true); otherwise its Forward and Train
// (the backward recomputes the forward from the stage's inputs).
func (p *Plan) Programs(s int, keep bool) (fwd, bwd *Program, kept bool, err error) {
	if s < 0 || s >= len(p.Stages) {
		return nil, nil, false, errors.Errorf("graphsplit: Programs(%d): the plan has %d stages", s, len(p.Stages))
	}
	st := p.Stages[s]
	if !keep || !p.CanKeep(s) {
		return st.Forward, st.Train, false, nil
	}
	k, err := p.NewKeeping(s)
	if err != nil {
		return nil, nil, false, err
	}
	return k.Forward, k.Backward, true, nil
}
