package graphsplit

import (
	"github.com/pipemare/pipemare/internal/reach"
	"slices"
	"sort"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// analysis is what Split learns about the user's graph before cutting it:
// which nodes the cost needs, which are data, learnables or constants, and
// the order in which the op nodes are laid out along the pipeline.
type analysis struct {
	g     *gorgonia.ExprGraph
	cost  *gorgonia.Node
	learn map[*gorgonia.Node]int // learnable → index in the user's list

	kids       map[*gorgonia.Node]gorgonia.Nodes // children, cached
	needed     map[*gorgonia.Node]bool           // ancestors of the cost, cost included
	replicable map[*gorgonia.Node]bool           // constants and shape-only expressions
	feeds      gorgonia.Nodes                    // data inputs the cost needs, graph order

	// seq are the op nodes laid out along the pipeline: a stage may start
	// at any of them but the first.
	seq gorgonia.Nodes
	pos map[*gorgonia.Node]int // position in seq

	// stageAt[p] is the stage of seq[p]; nStages the number of stages.
	stageAt []int
	nStages int
	// dataDep marks the nodes that depend on a data input.
	dataDep map[*gorgonia.Node]bool
	// unguarded leaves the programs' ops unguarded (see seal).
	unguarded bool
	// substitute lets stages compute some ops with stage ops
	// (substitute.go).
	substitute bool
	// statelessOnly limits substitution to plain BatchNorm and MaxPool.
	statelessOnly bool
}

func (a *analysis) children(n *gorgonia.Node) gorgonia.Nodes {
	if c, ok := a.kids[n]; ok {
		return c
	}
	var out gorgonia.Nodes
	it := a.g.From(n.ID())
	for it != nil && it.Next() {
		out = append(out, it.Node().(*gorgonia.Node))
	}
	a.kids[n] = out
	return out
}

// isConstant reports whether n is a constant node (its op holds its value:
// gorgonia's constantScalar or constantTensor — the latter reports an arity
// of 1, so the arity cannot tell).
func isConstant(n *gorgonia.Node) bool {
	if n.Op() == nil {
		return false
	}
	if _, ok := n.Op().(interface{ Value() gorgonia.Value }); !ok {
		return false
	}
	name := opTypeName(n.Op())
	return name == "constantScalar" || name == "constantTensor"
}

// isDropout reports whether n is gorgonia's Dropout.
func isDropout(n *gorgonia.Node) bool { return opTypeName(n.Op()) == "dropoutOp" }

// opTypeName is the name of op's type, without the pointer.
func opTypeName(op gorgonia.Op) string { return reach.TypeName(op) }

// isSizeOf reports whether n is a gorgonia.SizeOf node: its value depends only
// on the static shape of its child, and ops such as Repeat read it as a
// dimension at graph-building time, so it is never passed between stages.
func isSizeOf(n *gorgonia.Node) bool {
	return n.Op() != nil && opTypeName(n.Op()) == "sizeOp"
}

// analyze checks the model Split is given and analyses it: which nodes the
// cost needs, what each of them is, and the layout of its ops.
func analyze(g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes) (*analysis, error) {
	if err := checkModel(g, cost, learnables); err != nil {
		return nil, err
	}
	a := &analysis{
		g: g, cost: cost,
		learn:      make(map[*gorgonia.Node]int, len(learnables)),
		kids:       make(map[*gorgonia.Node]gorgonia.Nodes),
		needed:     make(map[*gorgonia.Node]bool),
		replicable: make(map[*gorgonia.Node]bool),
		pos:        make(map[*gorgonia.Node]int),
	}
	if err := a.addLearnables(learnables); err != nil {
		return nil, err
	}
	if err := a.markNeeded(learnables); err != nil {
		return nil, err
	}
	ops, err := a.classify()
	if err != nil {
		return nil, err
	}
	if a.replicable[cost] {
		return nil, errors.Errorf("graphsplit: cost %q is a constant expression", cost.Name())
	}
	if _, ok := a.learn[cost]; ok {
		return nil, errors.Errorf("graphsplit: cost %q is itself a learnable", cost.Name())
	}
	if err := a.checkDifferentiable(); err != nil {
		return nil, err
	}
	a.layout(ops, a.dataDep)
	return a, nil
}

// checkModel refuses a nil graph or cost, a cost of another graph or that
// is not a scalar, and an empty list of learnables.
func checkModel(g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes) error {
	if g == nil {
		return errors.New("graphsplit: graph is nil")
	}
	if cost == nil {
		return errors.New("graphsplit: cost node is nil")
	}
	if cost.Graph() != g {
		return errors.Errorf("graphsplit: cost %q belongs to another graph than the one given; pass the graph the cost was built in", cost.Name())
	}
	if !cost.IsScalar() {
		return errors.Errorf("graphsplit: cost %q has shape %v, want a scalar; reduce it (e.g. gorgonia.Mean) before splitting", cost.Name(), cost.Shape())
	}
	if len(learnables) == 0 {
		return errors.New("graphsplit: no learnables given; pass the nodes the solver updates")
	}
	return nil
}

// addLearnables records the learnables' indices in a.learn, refusing one
// that is nil, of another graph, computed, without a value, or listed
// twice (checked in that order, learnable by learnable).
func (a *analysis) addLearnables(learnables gorgonia.Nodes) error {
	for i, l := range learnables {
		switch {
		case l == nil:
			return errors.Errorf("graphsplit: learnable %d is nil", i)
		case l.Graph() != a.g:
			return errors.Errorf("graphsplit: learnable %d (%q) belongs to another graph", i, l.Name())
		case !l.IsVar():
			return errors.Errorf("graphsplit: learnable %d (%q) is computed by op %v; learnables must be input nodes with a value (gorgonia.NewMatrix(..., WithValue/WithInit))", i, l.Name(), l.Op())
		case l.Value() == nil:
			return errors.Errorf("graphsplit: learnable %d (%q) has no value; initialise it (gorgonia.WithInit or WithValue) before splitting", i, l.Name())
		}
		if j, dup := a.learn[l]; dup {
			return errors.Errorf("graphsplit: learnable %q is listed twice (positions %d and %d)", l.Name(), j, i)
		}
		a.learn[l] = i
	}
	return nil
}

// markNeeded marks in a.needed everything the cost depends on, the cost
// included, and refuses a learnable the cost does not depend on.
func (a *analysis) markNeeded(learnables gorgonia.Nodes) error {
	stack := gorgonia.Nodes{a.cost}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if a.needed[n] {
			continue
		}
		a.needed[n] = true
		stack = append(stack, a.children(n)...)
	}
	for _, l := range learnables {
		if !a.needed[l] {
			return errors.Errorf("graphsplit: the cost %q does not depend on learnable %q; drop it from the learnables or connect it to the cost", a.cost.Name(), l.Name())
		}
	}
	return nil
}

// classify goes through the needed nodes other than learnables in
// topological order (the graph's insertion order): it collects the data
// inputs in a.feeds, marks the constants and shape-only expressions
// replicable and the nodes that depend on data in a.dataDep, and returns
// the other nodes, the ops, in that order. It refuses scalar data inputs,
// ops without inputs (random ops) and Dropout.
func (a *analysis) classify() (gorgonia.Nodes, error) {
	dataDep := make(map[*gorgonia.Node]bool)
	a.dataDep = dataDep
	var ops gorgonia.Nodes
	for _, n := range a.g.AllNodes() {
		if !a.needed[n] {
			continue
		}
		if _, ok := a.learn[n]; ok {
			continue
		}
		switch {
		case n.IsVar() && n.IsScalar():
			return nil, errors.Errorf("graphsplit: data input %q is a scalar: a pipeline cuts every data input into microbatches along its first axis; give it a leading batch axis, or make it a constant (gorgonia.NewConstant)", n.Name())
		case n.IsVar():
			a.feeds = append(a.feeds, n)
			dataDep[n] = true
			continue
		case isConstant(n):
			a.replicable[n] = true
			continue
		case n.Op().Arity() == 0 || len(a.children(n)) == 0:
			return nil, errors.Errorf("graphsplit: node %q (op %v) has no inputs and is not a constant: random ops cannot be split; draw the random tensor yourself and feed it as a data input", n.Name(), n.Op())
		case isDropout(n):
			return nil, errors.Errorf("graphsplit: node %q is gorgonia's Dropout, which draws its mask from a generator seeded by the clock (two identical trainings differ): multiply by a mask data input instead (gorgonia.HadamardProd) and let the engine draw it from its seed (asyncvm.WithDropoutMask)", n.Name())
		}
		rep := true
		for _, c := range a.children(n) {
			if dataDep[c] {
				dataDep[n] = true
			}
			if !a.replicable[c] {
				rep = false
			}
		}
		if isSizeOf(n) || rep {
			a.replicable[n] = true
			continue
		}
		ops = append(ops, n)
	}
	return ops, nil
}

// checkDifferentiable refuses an op that gorgonia's symbolic backward
// cannot pass: Backpropagate asks every op the cost reaches through
// differentiable inputs which of its inputs it is differentiable with
// respect to (gorgonia.SDOp's DiffWRT), and fails with an index out of range
// where an op does not answer. It walks the same nodes, from the cost down.
func (a *analysis) checkDifferentiable() error {
	reached := map[*gorgonia.Node]bool{a.cost: true}
	all := a.g.AllNodes()
	for i := len(all) - 1; i >= 0; i-- {
		n := all[i]
		if !reached[n] || n.Op() == nil || isConstant(n) {
			continue
		}
		kids := a.children(n)
		sd, ok := n.Op().(gorgonia.SDOp)
		if !ok {
			return errors.Errorf("graphsplit: node %q: op %v (%T) has no symbolic derivative (it does not implement gorgonia.SDOp), and the cost's backward passes through it; give the op DiffWRT and SymDiff, or compute the node outside the graph and feed it as a data input", n.Name(), n.Op(), n.Op())
		}
		diffs := sd.DiffWRT(len(kids))
		if len(diffs) != len(kids) {
			return errors.Errorf("graphsplit: node %q: op %v (%T) says which of its inputs it is differentiable with respect to for %d of its %d inputs (DiffWRT); gorgonia's symbolic backward needs all of them", n.Name(), n.Op(), n.Op(), len(diffs), len(kids))
		}
		for j, c := range kids {
			if diffs[j] {
				reached[c] = true
			}
		}
	}
	return nil
}

// layout orders the op nodes along the pipeline: data-dependent ops in graph
// order, and each op that depends only on learnables and constants (the
// Reshape of a convolution filter, a transposed weight) right before its
// first consumer, so that it lands in the stage that uses it.
func (a *analysis) layout(ops gorgonia.Nodes, dataDep map[*gorgonia.Node]bool) {
	placed := make(map[*gorgonia.Node]bool, len(ops))
	isOp := make(map[*gorgonia.Node]bool, len(ops))
	for _, n := range ops {
		isOp[n] = true
	}
	var place func(n *gorgonia.Node)
	place = func(n *gorgonia.Node) {
		if placed[n] {
			return
		}
		placed[n] = true
		for _, c := range a.children(n) {
			if isOp[c] && !dataDep[c] {
				place(c)
			}
		}
		a.pos[n] = len(a.seq)
		a.seq = append(a.seq, n)
	}
	for _, n := range ops {
		if dataDep[n] {
			place(n)
		}
	}
	for _, n := range ops { // a model whose cost reads no data at all
		place(n)
	}
}

// isWeight reports whether n is weight-shaped: at least two of its
// dimensions are larger than one (a matrix or a filter, not a bias or a
// normalisation gain).
func isWeight(n *gorgonia.Node) bool {
	big := 0
	for _, d := range n.Shape() {
		if d > 1 {
			big++
		}
	}
	return big >= 2
}

// fineCuts returns the layer boundaries FineGrained chooses its cuts
// among: at each op that applies a weight (appliesWeight), moved back over
// the learnable-only ops that layout placed right before it. A chosen cut
// then starts at the layer's im2col (atIm2col). A weight applied
// again — a tied embedding, a recurrence's weights at every step — starts a
// layer again: its readers then share it across stages.
func (a *analysis) fineCuts() []int {
	var cuts []int
	firstLayer := true // the ops before the first weight join its stage
	for p, n := range a.seq {
		if a.paramOnly(p) || !a.appliesWeight(n) {
			continue
		}
		if firstLayer {
			firstLayer = false
			continue
		}
		start := p
		for start > 0 && a.paramOnly(start-1) {
			start--
		}
		if start > 0 && (len(cuts) == 0 || cuts[len(cuts)-1] < start) {
			cuts = append(cuts, start)
		}
	}
	return cuts
}

// atIm2col moves each of FineGrained's cuts back over the convolution's
// im2col and reshape right before it (patchesOp), not past the cut
// before. They read no learnable, so every learnable stays in its stage
// and the weights trained are the same; the cuts are chosen among
// fineCuts first, so the same layers share a stage as before.
func (a *analysis) atIm2col(cuts []int) []int {
	out := slices.Clone(cuts)
	for i := range out {
		lo := 1
		if i > 0 {
			lo = out[i-1] + 1
		}
		for out[i] > lo && a.patchesOp(out[i]-1) {
			out[i]--
		}
	}
	return out
}

// patchesOp reports whether the op at position p builds a convolution's
// patches: gorgonia's im2col, or the Reshape of one to the patch matrix.
// A convolution's layer starts at its im2col, so that its stage receives
// the image, not patches kh·kw times its size (to copy, keep and send, and
// their gradient back).
func (a *analysis) patchesOp(p int) bool {
	n := a.seq[p]
	if isReshape(n) {
		n = a.children(n)[0]
	}
	return n.Op() != nil && opTypeName(n.Op()) == "im2colOp"
}

// appliesWeight reports whether op n applies a weight to data: one of its
// inputs is a weight, or a weight-shaped expression of learnables only that
// reads one (a transposed matrix, a reshaped filter). A reduction of a
// weight (a penalty Σw²) is not a layer.
func (a *analysis) appliesWeight(n *gorgonia.Node) bool {
	for _, c := range a.children(n) {
		if isWeight(c) && a.readsWeight(c) {
			return true
		}
	}
	return false
}

// readsWeight reports whether n is a weight or an op node that depends on
// one through learnable-only ops.
func (a *analysis) readsWeight(n *gorgonia.Node) bool {
	if _, ok := a.learn[n]; ok {
		return isWeight(n)
	}
	p, ok := a.pos[n]
	if !ok || !a.paramOnly(p) {
		return false
	}
	for _, c := range a.children(n) {
		if a.readsWeight(c) {
			return true
		}
	}
	return false
}

// paramOnly reports whether seq[p] depends on no data input.
func (a *analysis) paramOnly(p int) bool { return !a.dataDep[a.seq[p]] }

// explicitCuts resolves CutAt names to positions.
func (a *analysis) explicitCuts(names []string) ([]int, error) {
	byName := make(map[string]*gorgonia.Node)
	for _, n := range a.g.AllNodes() {
		if _, dup := byName[n.Name()]; !dup {
			byName[n.Name()] = n
		}
	}
	seen := make(map[int]string)
	var cuts []int
	for _, name := range names {
		n, ok := byName[name]
		if !ok {
			return nil, errors.Errorf("graphsplit: cut point %q: no node of that name in the graph", name)
		}
		p, ok := a.pos[n]
		switch {
		case !ok && !a.needed[n]:
			return nil, errors.Errorf("graphsplit: cut point %q: the cost does not depend on it", name)
		case !ok:
			return nil, errors.Errorf("graphsplit: cut point %q: it is an input, a learnable or a constant expression, not an op a stage can start at", name)
		case p == 0:
			return nil, errors.Errorf("graphsplit: cut point %q is the first op of the graph; stage 0 already starts there", name)
		}
		if prev, dup := seen[p]; dup {
			return nil, errors.Errorf("graphsplit: cut points %q and %q are the same node", prev, name)
		}
		seen[p] = name
		cuts = append(cuts, p)
	}
	sort.Ints(cuts)
	return cuts, nil
}

// cloneConstant puts constant n into graph g. A tensor constant gets its
// own copy of the value: gorgonia's constant op returns the tensor it holds
// and the tape machine writes to it (its engine), so two stages that share
// one would race.
func cloneConstant(n *gorgonia.Node, g *gorgonia.ExprGraph) *gorgonia.Node {
	v := n.Op().(interface{ Value() gorgonia.Value }).Value()
	t, ok := v.(tensor.Tensor)
	if !ok { // scalars are immutable
		return n.CloneTo(g)
	}
	c := gorgonia.NewConstant(t.Clone(), gorgonia.WithName(n.Name()))
	return g.AddNode(c)
}
