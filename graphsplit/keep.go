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
	if !hasGradients(st) {
		return nil, errors.Errorf("graphsplit: stage %d has no gradient to compute (no learnable, only data inputs): it has no keeping backward; it recomputes (Plan.Programs)", s)
	}
	if !p.CanKeep(s) {
		return nil, errors.Errorf("graphsplit: stage %d has stateful ops (%s): only recomputation gives exact gradients there", s, statefulKinds(st))
	}
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, errors.Errorf("graphsplit: stage %d keeping programs: gorgonia panicked: %v\n%s", s, r, debug.Stack())
		}
	}()
	k, _, err = p.keeping(s)
	return k, err
}

// keeping builds stage s's keeping programs, and returns the keeper they
// were cut from.
func (p *Plan) keeping(s int) (*Keeping, *keeper, error) {
	kp, err := p.newKeeper(s)
	if err != nil {
		return nil, nil, err
	}
	if err := kp.splitBackward(); err != nil {
		return nil, nil, err
	}
	back, err := kp.backward()
	if err != nil {
		return nil, nil, err
	}
	fwd, err := kp.forward()
	if err != nil {
		return nil, nil, err
	}
	return &Keeping{Forward: fwd, Backward: back}, kp, nil
}

// keeper is the state of NewKeeping for stage s: the draft train program
// the keeping programs are cut from, what its nodes are, and, once
// splitBackward ran, which of them the backward saves, rebuilds and
// computes; backward fills g and local.
type keeper struct {
	p  *Plan
	s  int
	st *Stage
	// train is the stage's draft train program; index gives each of its
	// nodes' position in train.Graph.AllNodes(), orig its origin.
	train *Program
	index map[*gorgonia.Node]int
	orig  map[*gorgonia.Node]origin
	// isParam and isGradIn map train's learnables and output-gradient
	// placeholders to their indices.
	isParam  map[*gorgonia.Node]int
	isGradIn map[*gorgonia.Node]int

	// saved are the forward nodes the backward reads and that the forward
	// returns; rebuilt the shape-only ones it reads, which it rebuilds;
	// bwd the nodes the backward computes. Each is in train's node order.
	saved, rebuilt, bwd gorgonia.Nodes

	// g is the backward program's graph; local maps train's nodes to
	// theirs in g.
	g     *gorgonia.ExprGraph
	local map[*gorgonia.Node]*gorgonia.Node
}

// newKeeper drafts stage s's train program, its output-gradient
// placeholders shaped like those of the stage's Train, and indexes its
// nodes.
func (p *Plan) newKeeper(s int) (*keeper, error) {
	st := p.Stages[s]
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
	k := &keeper{p: p, s: s, st: st, train: train}
	all := train.Graph.AllNodes()
	k.index = make(map[*gorgonia.Node]int, len(all))
	for i, n := range all {
		k.index[n] = i
	}
	k.orig = train.nodeOrigins()
	k.isParam = make(map[*gorgonia.Node]int)
	for i, l := range train.Learnables {
		k.isParam[l] = i
	}
	k.isGradIn = make(map[*gorgonia.Node]int)
	for i, g := range train.OutputGrads {
		if g != nil {
			k.isGradIn[g] = i
		}
	}
	return k, nil
}

// splitBackward sets saved, rebuilt and bwd: the backward is every node
// the gradients need that the forward did not build; the forward nodes it
// reads are saved, or rebuilt when they are shape-only expressions. It
// fails when a saved node stands for no original node.
func (k *keeper) splitBackward() error {
	bwd := make(map[*gorgonia.Node]bool)
	saved := make(map[*gorgonia.Node]bool)
	var walk func(n *gorgonia.Node)
	walk = func(n *gorgonia.Node) {
		if bwd[n] || saved[n] {
			return
		}
		if _, ok := k.isParam[n]; ok || isConstant(n) {
			return
		}
		if k.index[n] < k.train.fwdCount {
			saved[n] = true
			return
		}
		bwd[n] = true
		it := k.train.Graph.From(n.ID())
		for it != nil && it.Next() {
			walk(it.Node().(*gorgonia.Node))
		}
	}
	for _, g := range append(append(gorgonia.Nodes{}, k.train.InputGrads...), k.train.LearnableGrads...) {
		if g != nil {
			walk(g)
		}
	}
	for n := range saved {
		o, ok := k.orig[n]
		switch {
		case !ok:
			return errors.Errorf("graphsplit: stage %d: the backward reads forward node %q that no original node maps to", k.s, n.Name())
		case o.aux < 0 && k.p.a.replicable[o.node]:
			// Shape-only expressions (SizeOf …) are rebuilt, not saved:
			// ops read them as dimensions when they are built.
			k.rebuilt = append(k.rebuilt, n)
		default:
			k.saved = append(k.saved, n)
		}
	}
	for n := range bwd {
		k.bwd = append(k.bwd, n)
	}
	k.byIndex(k.saved)
	k.byIndex(k.rebuilt)
	k.byIndex(k.bwd)
	return nil
}

// byIndex sorts ns, nodes of train, in train's node order.
func (k *keeper) byIndex(ns gorgonia.Nodes) {
	sort.Slice(ns, func(i, j int) bool { return k.index[ns[i]] < k.index[ns[j]] })
}

// backward builds the backward program: its inputs (the saved tensors,
// learnables and output gradients), the rebuilt shape expressions, the
// backward's ops in train's order, and its gradient outputs.
func (k *keeper) backward() (*Program, error) {
	return k.program("backward", k.backwardInputs, k.bwd, k.backwardOutputs)
}

// program builds a program of kind from train's nodes: inputs adds its
// placeholders (and maps train's nodes to them in local), then come the
// rebuilt shape expressions and the ops of compute (train's nodes, in
// train's order), and outputs sets its outputs.
func (k *keeper) program(kind string, inputs func(*Program), compute gorgonia.Nodes, outputs func(*Program) error) (*Program, error) {
	k.g = gorgonia.NewGraph(gorgonia.WithGraphName(fmt.Sprintf("stage%d_%s", k.s, kind)))
	k.local = make(map[*gorgonia.Node]*gorgonia.Node)
	prog := &Program{Stage: k.s, Graph: k.g, kind: kind}
	inputs(prog)
	if err := k.rebuildShapes(); err != nil {
		return nil, err
	}
	if err := k.apply(compute); err != nil {
		return nil, err
	}
	if err := outputs(prog); err != nil {
		return nil, err
	}
	trainWhere := k.train.origins()
	where := make(map[*gorgonia.Node]string, len(k.local))
	for n, l := range k.local {
		where[l] = trainWhere[n]
	}
	if err := prog.finish(where, k.p.a.unguarded); err != nil {
		return nil, err
	}
	return prog, nil
}

// backwardInputs adds back's placeholders to g, in this order: one per
// saved tensor (back.Inputs), the stage's learnables bound to their values
// (back.Learnables), and one per output gradient (back.OutputGrads, nil
// where train has none); local maps train's nodes to them.
func (k *keeper) backwardInputs(back *Program) {
	for i, n := range k.saved {
		ph := newInput(k.g, n.Dtype(), n.Shape(), fmt.Sprintf("stage%d/saved%d/%s", k.s, i, k.orig[n].name()))
		k.local[n] = ph
		back.Inputs = append(back.Inputs, ph)
	}
	k.learnableInputs(back)
	back.OutputGrads = make(gorgonia.Nodes, len(k.train.OutputGrads))
	for i, gr := range k.train.OutputGrads {
		if gr != nil {
			ph := newInput(k.g, gr.Dtype(), gr.Shape(), gr.Name())
			k.local[gr] = ph
			back.OutputGrads[i] = ph
		}
	}
}

// learnableInputs adds the stage's learnables to g, bound to their values
// (prog.Learnables).
func (k *keeper) learnableInputs(prog *Program) {
	for i, l := range k.st.Learnables {
		n := placeholder(k.g, l, fmt.Sprintf("stage%d/param%d/%s", k.s, i, l.Name()), gorgonia.WithValue(l.Value()))
		k.local[k.train.Learnables[i]] = n
		prog.Learnables = append(prog.Learnables, n)
		prog.params = append(prog.params, l.Value())
	}
}

// rebuildShapes builds the rebuilt shape expressions in g, in order, from
// their original nodes.
func (k *keeper) rebuildShapes() error {
	shapes := &builder{a: k.p.a, st: k.st, g: k.g, local: make(map[*gorgonia.Node]*gorgonia.Node), stubOnly: true}
	for _, n := range k.rebuilt {
		l, err := shapes.node(k.orig[n].node)
		if err != nil {
			return err
		}
		k.local[n] = l
	}
	return nil
}

// apply re-applies the op of every node of ns (train's nodes, in train's
// order) but the output gradients' placeholders to its children in g.
func (k *keeper) apply(ns gorgonia.Nodes) error {
	for _, n := range ns {
		if _, ok := k.isGradIn[n]; ok {
			continue
		}
		var kids gorgonia.Nodes
		it := k.train.Graph.From(n.ID())
		for it != nil && it.Next() {
			c, err := k.get(it.Node().(*gorgonia.Node))
			if err != nil {
				return err
			}
			kids = append(kids, c)
		}
		l, err := applyOp(n, kids)
		if err != nil {
			return errors.Wrapf(err, "graphsplit: stage %d backward", k.s)
		}
		k.local[n] = l
	}
	return nil
}

// backwardOutputs sets back's InputGrads (nil where train has none) and
// LearnableGrads to g's nodes for train's.
func (k *keeper) backwardOutputs(back *Program) (err error) {
	back.InputGrads = make(gorgonia.Nodes, len(k.train.InputGrads))
	for i, gr := range k.train.InputGrads {
		if gr != nil {
			if back.InputGrads[i], err = k.get(gr); err != nil {
				return err
			}
		}
	}
	back.LearnableGrads = make(gorgonia.Nodes, len(k.train.LearnableGrads))
	for i, gr := range k.train.LearnableGrads {
		if back.LearnableGrads[i], err = k.get(gr); err != nil {
			return err
		}
	}
	return nil
}

// get returns g's node for train's node n: the one local holds, or a
// clone of n if it is a constant (then recorded in local). Any other node
// is an error.
func (k *keeper) get(n *gorgonia.Node) (*gorgonia.Node, error) {
	if l, ok := k.local[n]; ok {
		return l, nil
	}
	if isConstant(n) {
		l := cloneConstant(n, k.g)
		k.local[n] = l
		return l, nil
	}
	return nil, errors.Errorf("graphsplit: stage %d backward: node %q is not available", k.s, n.Name())
}

// forward builds the forward program, saving what the backward reads:
// its Kept outputs are its nodes for saved, in order.
func (k *keeper) forward() (*Program, error) {
	fwd, err := buildProgram(k.p.a, k.st, false, dropped{}, nil)
	if err != nil {
		return nil, err
	}
	for _, n := range k.saved {
		l, ok := fwd.at(k.orig[n])
		if !ok {
			return nil, errors.Errorf("graphsplit: stage %d: saved node %q is not in the forward program", k.s, k.orig[n].name())
		}
		fwd.Kept = append(fwd.Kept, l)
	}
	if err := fwd.finish(fwd.origins(), k.p.a.unguarded); err != nil {
		return nil, err
	}
	return fwd, nil
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
