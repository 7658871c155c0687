package graphsplit

import (
	"reflect"
	"sort"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
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

	seq gorgonia.Nodes         // op nodes laid out along the pipeline
	pos map[*gorgonia.Node]int // position in seq

	// legal[p] reports whether a stage may start at seq[p] (p ≥ 1).
	legal []bool
	// stageAt[p] is the stage of seq[p]; nStages the number of stages.
	stageAt []int
	nStages int
	// dataDep marks the nodes that depend on a data input.
	dataDep map[*gorgonia.Node]bool
	// substitute lets stages compute some ops with stage ops
	// (substitute.go).
	substitute bool
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
	name := reflect.TypeOf(n.Op()).Name()
	return name == "constantScalar" || name == "constantTensor"
}

// isSizeOf reports whether n is a gorgonia.SizeOf node: its value depends only
// on the static shape of its child, and ops such as Repeat read it as a
// dimension at graph-building time, so it is never passed between stages.
func isSizeOf(n *gorgonia.Node) bool {
	return n.Op() != nil && reflect.TypeOf(n.Op()).Name() == "sizeOp"
}

func analyze(g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes) (*analysis, error) {
	if g == nil {
		return nil, errors.New("graphsplit: graph is nil")
	}
	if cost == nil {
		return nil, errors.New("graphsplit: cost node is nil")
	}
	if cost.Graph() != g {
		return nil, errors.Errorf("graphsplit: cost %q belongs to another graph than the one given; pass the graph the cost was built in", cost.Name())
	}
	if !cost.IsScalar() {
		return nil, errors.Errorf("graphsplit: cost %q has shape %v, want a scalar; reduce it (e.g. gorgonia.Mean) before splitting", cost.Name(), cost.Shape())
	}
	if len(learnables) == 0 {
		return nil, errors.New("graphsplit: no learnables given; pass the nodes the solver updates")
	}
	a := &analysis{
		g: g, cost: cost,
		learn:      make(map[*gorgonia.Node]int, len(learnables)),
		kids:       make(map[*gorgonia.Node]gorgonia.Nodes),
		needed:     make(map[*gorgonia.Node]bool),
		replicable: make(map[*gorgonia.Node]bool),
		pos:        make(map[*gorgonia.Node]int),
	}
	for i, l := range learnables {
		switch {
		case l == nil:
			return nil, errors.Errorf("graphsplit: learnable %d is nil", i)
		case l.Graph() != g:
			return nil, errors.Errorf("graphsplit: learnable %d (%q) belongs to another graph", i, l.Name())
		case !l.IsVar():
			return nil, errors.Errorf("graphsplit: learnable %d (%q) is computed by op %v; learnables must be input nodes with a value (gorgonia.NewMatrix(..., WithValue/WithInit))", i, l.Name(), l.Op())
		case l.Value() == nil:
			return nil, errors.Errorf("graphsplit: learnable %d (%q) has no value; initialise it (gorgonia.WithInit or WithValue) before splitting", i, l.Name())
		}
		if j, dup := a.learn[l]; dup {
			return nil, errors.Errorf("graphsplit: learnable %q is listed twice (positions %d and %d)", l.Name(), j, i)
		}
		a.learn[l] = i
	}

	// Everything the cost depends on.
	stack := gorgonia.Nodes{cost}
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
			return nil, errors.Errorf("graphsplit: the cost %q does not depend on learnable %q; drop it from the learnables or connect it to the cost", cost.Name(), l.Name())
		}
	}

	// Classify in topological order (the graph's insertion order).
	dataDep := make(map[*gorgonia.Node]bool)
	a.dataDep = dataDep
	var ops gorgonia.Nodes
	for _, n := range g.AllNodes() {
		if !a.needed[n] {
			continue
		}
		if _, ok := a.learn[n]; ok {
			continue
		}
		switch {
		case n.IsVar():
			a.feeds = append(a.feeds, n)
			dataDep[n] = true
			continue
		case isConstant(n):
			a.replicable[n] = true
			continue
		case n.Op().Arity() == 0 || len(a.children(n)) == 0:
			return nil, errors.Errorf("graphsplit: node %q (op %v) has no inputs and is not a constant: random ops cannot be split; draw the random tensor yourself and feed it as a data input", n.Name(), n.Op())
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
	if a.replicable[cost] {
		return nil, errors.Errorf("graphsplit: cost %q is a constant expression", cost.Name())
	}
	if _, ok := a.learn[cost]; ok {
		return nil, errors.Errorf("graphsplit: cost %q is itself a learnable", cost.Name())
	}
	a.layout(ops, dataDep)
	a.findLegalCuts()
	return a, nil
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

// findLegalCuts marks where a stage may start: anywhere except strictly
// inside the span of ops that read one learnable, since a learnable lives in
// exactly one stage.
func (a *analysis) findLegalCuts() {
	a.legal = make([]bool, len(a.seq))
	for p := 1; p < len(a.seq); p++ {
		a.legal[p] = true
	}
	first := make(map[*gorgonia.Node]int)
	last := make(map[*gorgonia.Node]int)
	for p, n := range a.seq {
		for _, c := range a.children(n) {
			if _, ok := a.learn[c]; !ok {
				continue
			}
			if _, seen := first[c]; !seen {
				first[c] = p
			}
			last[c] = p
		}
	}
	for l, f := range first {
		for p := f + 1; p <= last[l]; p++ {
			a.legal[p] = false
		}
	}
}

// legalCount is the number of places a stage may start, besides position 0.
func (a *analysis) legalCount() int {
	k := 0
	for _, ok := range a.legal {
		if ok {
			k++
		}
	}
	return k
}

// isWeight reports whether learnable l is a weight: at least two of its
// dimensions are larger than one (a matrix or a filter, not a bias or a
// normalisation gain).
func isWeight(l *gorgonia.Node) bool {
	big := 0
	for _, d := range l.Shape() {
		if d > 1 {
			big++
		}
	}
	return big >= 2
}

// fineCuts returns the positions where FineGrained starts a stage: at the
// first op that reads a weight not read before (directly or through ops that
// depend only on learnables, which layout placed right before it), moved back
// over those learnable-only ops, where that position is legal.
func (a *analysis) fineCuts() []int {
	seen := make(map[*gorgonia.Node]bool)
	// weightsOf returns the weights n reads directly or through
	// learnable-only op nodes.
	var weightsOf func(n *gorgonia.Node, acc gorgonia.Nodes) gorgonia.Nodes
	weightsOf = func(n *gorgonia.Node, acc gorgonia.Nodes) gorgonia.Nodes {
		for _, c := range a.children(n) {
			if _, ok := a.learn[c]; ok {
				if isWeight(c) {
					acc = append(acc, c)
				}
				continue
			}
			if p, ok := a.pos[c]; ok && a.paramOnly(p) {
				acc = weightsOf(c, acc)
			}
		}
		return acc
	}
	var cuts []int
	firstLayer := true // the ops before the first weight join its stage
	for p, n := range a.seq {
		if a.paramOnly(p) {
			continue
		}
		fresh := false
		for _, w := range weightsOf(n, nil) {
			if !seen[w] {
				fresh = true
				seen[w] = true
			}
		}
		if !fresh {
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
		if start > 0 && a.legal[start] && (len(cuts) == 0 || cuts[len(cuts)-1] < start) {
			cuts = append(cuts, start)
		}
	}
	return cuts
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
		case !a.legal[p]:
			return nil, errors.Errorf("graphsplit: cut point %q falls between two ops that read learnable %q; a learnable lives in one stage, so cut before its first reader", name, a.straddled(p))
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

// straddled names a learnable whose readers span position p.
func (a *analysis) straddled(p int) string {
	for q := 0; q < p; q++ {
		for _, c := range a.children(a.seq[q]) {
			if _, ok := a.learn[c]; !ok {
				continue
			}
			for r := p; r < len(a.seq); r++ {
				for _, c2 := range a.children(a.seq[r]) {
					if c2 == c {
						return c.Name()
					}
				}
			}
		}
	}
	return "?"
}
