package graphsplit

import (
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"slices"

	"github.com/pipemare/pipemare/internal/stageops"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// WithoutOpSubstitution makes every stage re-apply the user's op objects as
// they are. By default a stage computes some of them with its own ops
// (internal/stageops), bit-identical to Gorgonia's with its default BLAS:
//
//   - BatchNorm and MaxPool2D without state in the op: the batch statistics
//     and the argmax are nodes the forward computes and the backward reads,
//     so such stages have keeping programs (CanKeep) and need no second
//     forward pass;
//   - a BatchNorm with its broadcast scale and bias, and a Rectify after
//     them, in one pass; Rectify alone in one op; a broadcast bias (a
//     linear layer's) added without materialising its Repeats;
//   - Conv2d's im2col writing the patch matrix directly, and its GEMM
//     writing NCHW directly (no reshape copy, no transpose), with no
//     gradient of the patches when nothing needs it (a convolution of
//     data that depends on no learnable);
//   - SoftMax and LogSoftMax along the last axis with the rows computed on
//     the stage's goroutine (gorgonia's start a goroutine per row).
//
// The user's graph is never changed; substitution only changes how a stage
// computes. Turn it off to run exactly the user's ops (the stages with
// BatchNorm or MaxPool then only recompute).
func WithoutOpSubstitution() Option { return func(c *config) { c.noSubstitution = true } }

// CanKeep reports whether stage s has keeping programs (NewKeeping): false
// when it re-applies an op of the user's that keeps state between its
// forward and its backward (GroupNorm, AvgPool, or BatchNorm and MaxPool
// with WithoutOpSubstitution), for which only recomputation is exact, and
// when it has no gradient to compute (no learnable and only data inputs,
// as a stage of the data's im2col alone): a keeping backward would be an
// empty program, which gorgonia cannot compile, and recomputing costs it
// nothing.
func (p *Plan) CanKeep(s int) bool {
	if s < 0 || s >= len(p.Stages) {
		return false
	}
	if !hasGradients(p.Stages[s]) {
		return false
	}
	for _, n := range p.Stages[s].Stateful {
		if !p.a.substitute || !statelessInStages(n) {
			return false
		}
	}
	return true
}

// hasGradients reports whether st's backward computes anything: the
// gradient of a learnable, or of an activation an earlier stage sent.
func hasGradients(st *Stage) bool {
	if len(st.Learnables) > 0 {
		return true
	}
	for _, in := range st.Inputs {
		if in.Kind != Data {
			return true
		}
	}
	return false
}

// statelessInStages reports whether stages compute stateful node n with
// stage ops that keep no state.
func statelessInStages(n *gorgonia.Node) bool {
	if _, ok := n.Op().(*gorgonia.BatchNormOp); ok {
		return true
	}
	_, err := stageops.NewMaxPool(n.Op())
	return err == nil
}

// substitute is the builder's hook where a stage re-applies one of the
// user's ops: it builds what a substitution puts in place of n and reports
// done. A node that a substitution computes along the way (absorbed) has no
// node of its own in the stage: done with a nil node. Not done: build n as
// the user's op.
func (b *builder) substitute(n *gorgonia.Node) (*gorgonia.Node, bool, error) {
	if !b.a.substitute || b.a.stage(n) != b.st.Index {
		return nil, false, nil
	}
	if b.subs == nil {
		b.subs = findSubstitutions(b.a, b.st)
	}
	s, ok := b.subs[n]
	switch {
	case !ok:
		return nil, false, nil
	case s.root != n:
		return nil, true, nil
	}
	kids := make(gorgonia.Nodes, len(s.leaves))
	for i, leaf := range s.leaves {
		l, err := b.node(leaf)
		if err != nil {
			return nil, true, err
		}
		kids[i] = l
	}
	l, aux, err := s.build(kids)
	if err != nil {
		return nil, true, errors.Wrapf(err, "graphsplit: stage %d: computing %q (op %v) with a stage op", b.st.Index, n.Name(), n.Op())
	}
	if !l.Shape().Eq(n.Shape()) {
		return nil, true, errors.Errorf("graphsplit: stage %d: the stage op for %q gave shape %v, the original has %v", b.st.Index, n.Name(), l.Shape(), n.Shape())
	}
	b.local[n] = l
	if len(aux) > 0 {
		if b.aux == nil {
			b.aux = make(map[*gorgonia.Node]gorgonia.Nodes)
		}
		b.aux[n] = aux
	}
	return l, true, nil
}

// substitution is what a stage computes in place of some of the user's
// nodes: root's value, from the leaves, with the absorbed nodes computed
// along the way (so never built). build gets the leaves' nodes in the stage
// and returns root's, and the extra nodes it made that a backward may read
// (a BatchNorm's statistics, a MaxPool's argmax). smaller, if not nil, is
// what to compute of root's pattern when this does not fit the stage.
type substitution struct {
	root     *gorgonia.Node
	absorbed gorgonia.Nodes
	leaves   gorgonia.Nodes
	build    func(leaves gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error)
	smaller  *substitution
}

// findSubstitutions matches the stage's nodes in order, each claimed by the
// first (largest) substitution that covers it and fits the stage, and
// returns every claimed node's substitution.
func findSubstitutions(a *analysis, st *Stage) map[*gorgonia.Node]*substitution {
	m := &matcher{a: a, st: st, users: make(map[*gorgonia.Node]gorgonia.Nodes)}
	for n := range a.needed {
		for _, c := range a.children(n) {
			m.users[c] = append(m.users[c], n)
		}
	}
	out := make(map[*gorgonia.Node]*substitution)
	for _, n := range st.Nodes {
		if _, claimed := out[n]; claimed {
			continue
		}
		s := m.match(n)
		for s != nil && !m.fits(s, out) {
			s = s.smaller
		}
		if s == nil {
			continue
		}
		for _, x := range append(gorgonia.Nodes{s.root}, s.absorbed...) {
			out[x] = s
		}
	}
	return out
}

// matcher recognises the patterns gorgonia's layer functions build.
type matcher struct {
	a     *analysis
	st    *Stage
	users map[*gorgonia.Node]gorgonia.Nodes // among the nodes the cost needs
	learn map[*gorgonia.Node]bool           // readsLearnable's answers
}

// readsLearnable reports whether n's value depends on a learnable. No
// gradient of the cost is needed at a node that does not (the data a
// model's first layer reads).
func (m *matcher) readsLearnable(n *gorgonia.Node) bool {
	if r, ok := m.learn[n]; ok {
		return r
	}
	_, r := m.a.learn[n]
	for _, c := range m.a.children(n) {
		r = r || m.readsLearnable(c)
	}
	if m.learn == nil {
		m.learn = make(map[*gorgonia.Node]bool)
	}
	m.learn[n] = r
	return r
}

// fits reports whether s lies in the stage, claims nothing claimed, and its
// absorbed nodes are read by nothing outside it (shape reads of them
// included, which only the absorbed nodes may make).
func (m *matcher) fits(s *substitution, claimed map[*gorgonia.Node]*substitution) bool {
	in := map[*gorgonia.Node]bool{s.root: true}
	for _, x := range s.absorbed {
		in[x] = true
	}
	for x := range in {
		if _, taken := claimed[x]; taken || m.a.stage(x) != m.st.Index {
			return false
		}
	}
	for _, x := range s.absorbed {
		for _, u := range m.users[x] {
			if in[u] {
				continue
			}
			if !isSizeOf(u) {
				return false
			}
			for _, uu := range m.users[u] {
				if !in[uu] {
					return false
				}
			}
		}
	}
	return true
}

func (m *matcher) match(n *gorgonia.Node) *substitution {
	switch op := n.Op().(type) {
	case *gorgonia.BatchNormOp:
		return m.batchNorm(n, op)
	}
	name := opTypeName(n.Op())
	if m.a.statelessOnly && name != "maxPoolOp" {
		return nil
	}
	switch name {
	case "maxPoolOp":
		mp, err := stageops.NewMaxPool(n.Op())
		if err != nil {
			return nil
		}
		return &substitution{root: n, leaves: m.a.children(n), build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
			y, idx, err := mp.Apply(k[0])
			return y, gorgonia.Nodes{idx}, err
		}}
	case "im2colOp":
		return m.im2col(n)
	case "softmaxOp":
		return m.softmax(n)
	case "linAlgBinOp":
		return m.convGEMM(n)
	case "elemBinOp":
		if v, z, ok := m.rectify(n); ok {
			return &substitution{root: z, absorbed: gorgonia.Nodes{n}, leaves: gorgonia.Nodes{v}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
				y, err := stageops.ReLU(k[0])
				return y, nil, err
			}}
		}
		return m.biasAdd(n)
	}
	return nil
}

// softmax matches gorgonia.SoftMax and LogSoftMax along the last axis, the
// axis both gorgonia's forward and its backward then use (for a column
// vector they disagree, and the user's op is kept).
func (m *matcher) softmax(n *gorgonia.Node) *substitution {
	if reach.TypeString(n.Op()) != "*gorgonia.softmaxOp" {
		return nil
	}
	axis, err := reach.Int(n.Op(), "axis")
	if err != nil {
		return nil
	}
	isLog, err := reach.Bool(n.Op(), "isLog")
	x := m.a.children(n)[0]
	shape := x.Shape()
	if err != nil || shape.Dims() == 0 {
		return nil
	}
	if dt := x.Dtype(); dt != tensor.Float32 && dt != tensor.Float64 {
		return nil
	}
	last := shape.Dims() - 1
	forward := last // gorgonia's softmaxOp.UsePreallocDo
	if shape.IsColVec() || (shape.IsVector() && !shape.IsRowVec()) {
		forward = 0
	}
	if axis != -1 {
		forward = axis
	}
	if resolveAxis(forward, shape.Dims()) != last || resolveAxis(axis, shape.Dims()) != last {
		return nil
	}
	log := isLog
	return &substitution{root: n, leaves: gorgonia.Nodes{x}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
		y, err := stageops.SoftMax(k[0], log)
		return y, nil, err
	}}
}

// resolveAxis is tensor's: a negative axis counts from the end.
func resolveAxis(axis, dims int) int {
	r := axis % dims
	if r < 0 {
		r += dims
	}
	return r
}

// biasAdd matches x + bias where bias reaches the + through the Repeats
// (and Reshapes) of gorgonia's broadcasting: a linear layer's bias.
func (m *matcher) biasAdd(add *gorgonia.Node) *substitution {
	kids := m.a.children(add)
	if !isBinOp(add, "+ false") || len(kids) != 2 {
		return nil
	}
	for i, x := range kids {
		bias, axes, chain, ok := m.broadcastOf(kids[1-i], x.Shape())
		if !ok {
			continue
		}
		return &substitution{root: add, absorbed: chain, leaves: gorgonia.Nodes{x, bias}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
			y, err := stageops.BiasAdd(k[0], k[1], axes)
			return y, nil, err
		}}
	}
	return nil
}

// isBinOp reports whether n is an element-wise binary op printing as s
// ("⊙ false", "+ false", ">= true").
func isBinOp(n *gorgonia.Node, s string) bool {
	return opTypeName(n.Op()) == "elemBinOp" && n.Op().String() == s
}

// only returns the single user of n that is not a SizeOf.
func (m *matcher) only(n *gorgonia.Node) *gorgonia.Node {
	var u *gorgonia.Node
	for _, x := range m.users[n] {
		if isSizeOf(x) {
			continue
		}
		if u != nil {
			return nil
		}
		u = x
	}
	return u
}

// rectify matches gorgonia.Rectify at its comparison g = (v ≥ 0), which
// only z = v ⊙ g reads.
func (m *matcher) rectify(g *gorgonia.Node) (v, z *gorgonia.Node, ok bool) {
	kids := m.a.children(g)
	if !isBinOp(g, ">= true") || len(kids) != 2 || !isZero(kids[1]) {
		return nil, nil, false
	}
	v = kids[0]
	z = m.only(g)
	if z == nil || len(m.users[g]) != 1 || !isBinOp(z, "⊙ false") {
		return nil, nil, false
	}
	if zk := m.a.children(z); len(zk) != 2 || zk[0] != v || zk[1] != g {
		return nil, nil, false
	}
	return v, z, true
}

func isZero(n *gorgonia.Node) bool {
	if !isConstant(n) || !n.IsScalar() {
		return false
	}
	switch x := n.Value().Data().(type) {
	case float32:
		return x == 0
	case float64:
		return x == 0
	}
	return false
}

// batchNorm matches a BatchNorm, with the broadcast scale and bias
// gorgonia.BatchNorm adds after it and a Rectify after those when they are
// there — each smaller than the one before, for when a cut leaves the
// Rectify, or the scale and bias, to the next stage: every BatchNorm is a
// stage op, without state, whose stage keeps (CanKeep).
func (m *matcher) batchNorm(n *gorgonia.Node, op *gorgonia.BatchNormOp) *substitution {
	x := m.a.children(n)[0]
	plain := &substitution{root: n, leaves: gorgonia.Nodes{x}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
		y, stats, err := stageops.BatchNorm{Op: op}.Apply(k[0])
		return y, gorgonia.Nodes{stats}, err
	}}
	mul := m.only(n)
	if m.a.statelessOnly || mul == nil || !isBinOp(mul, "⊙ false") {
		return plain
	}
	scale, sAxes, sChain, ok := m.broadcastOf(other(m.a.children(mul), n), x.Shape())
	if !ok {
		return plain
	}
	add := m.only(mul)
	if add == nil || !isBinOp(add, "+ false") {
		return plain
	}
	bias, bAxes, bChain, ok := m.broadcastOf(other(m.a.children(add), mul), x.Shape())
	if !ok {
		return plain
	}
	fused := func(relu bool) func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
		return func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
			bn := stageops.BatchNorm{Op: op, Scale: k[1], Bias: k[2], ScaleAxes: sAxes, BiasAxes: bAxes, ReLU: relu}
			y, stats, err := bn.Apply(k[0])
			return y, gorgonia.Nodes{stats}, err
		}
	}
	leaves := gorgonia.Nodes{x, scale, bias}
	affine := &substitution{root: add, absorbed: append(append(gorgonia.Nodes{n, mul}, sChain...), bChain...), leaves: leaves, build: fused(false), smaller: plain}
	for _, g := range m.users[add] {
		if _, z, ok := m.rectify(g); ok && len(m.users[add]) == 2 {
			absorbed := append(append(gorgonia.Nodes{}, affine.absorbed...), add, g)
			return &substitution{root: z, absorbed: absorbed, leaves: leaves, build: fused(true), smaller: affine}
		}
	}
	return affine
}

// other returns the child of a binary node that is not n (nil if both or
// neither are).
func other(kids gorgonia.Nodes, n *gorgonia.Node) *gorgonia.Node {
	if len(kids) != 2 || kids[0] == kids[1] {
		return nil
	}
	switch n {
	case kids[0]:
		return kids[1]
	case kids[1]:
		return kids[0]
	}
	return nil
}

// broadcastOf matches the chain gorgonia's broadcasting builds from a
// per-channel tensor up to node top of the given shape: Repeats (along
// increasing axes other than 1) of Reshapes of a leaf with one element per
// channel. It returns the leaf, the repeated axes in order and the chain's
// nodes (fits checks that nothing else reads them).
func (m *matcher) broadcastOf(top *gorgonia.Node, shape tensor.Shape) (leaf *gorgonia.Node, axes []int, chain gorgonia.Nodes, ok bool) {
	if top == nil || len(shape) < 2 || !top.Shape().Eq(shape) {
		return nil, nil, nil, false
	}
	n := top
	for {
		switch {
		case opTypeName(n.Op()) == "repeatOp":
			along, err := reach.Int(n.Op(), "along")
			if err != nil {
				return nil, nil, nil, false
			}
			axes = append([]int{along}, axes...)
		case isReshape(n):
		default:
			if n == top || n.Shape().TotalSize() != shape[1] || !broadcastAxes(axes) {
				return nil, nil, nil, false
			}
			return n, axes, chain, true
		}
		chain = append(chain, n)
		n = m.a.children(n)[0]
	}
}

// broadcastAxes accepts what gorgonia's broadcasting of a per-channel
// tensor repeats: increasing axes, none of them the channels'.
func broadcastAxes(axes []int) bool {
	for i, a := range axes {
		if a == 1 || (i > 0 && a <= axes[i-1]) {
			return false
		}
	}
	return len(axes) > 0
}

func isReshape(n *gorgonia.Node) bool {
	_, _, ok := reshapeShapes(n.Op())
	return ok
}

// im2col matches gorgonia.Conv2d's im2col and the Reshape of its result to
// the patch matrix, which alone reads it.
func (m *matcher) im2col(n *gorgonia.Node) *substitution {
	x := m.a.children(n)[0]
	ic, err := stageops.NewIm2Col(n.Op(), x.Shape())
	if err != nil {
		return nil
	}
	r := m.only(n)
	if r == nil || len(m.users[n]) != 1 || !isReshape(r) || !r.Shape().Eq(ic.Shape()) {
		return nil
	}
	return &substitution{root: r, absorbed: gorgonia.Nodes{n}, leaves: gorgonia.Nodes{x}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
		p, err := ic.Apply(k[0])
		return p, nil, err
	}}
}

// convGEMM matches the rest of gorgonia.Conv2d: the GEMM P·Fᵀ, its Reshape
// to (B, H', W', C') and the Transpose to (B, C', H', W').
func (m *matcher) convGEMM(mm *gorgonia.Node) *substitution {
	kids := m.a.children(mm)
	if mm.Op().String() != "A × Bᵀ" || len(kids) != 2 || kids[0].Dims() != 2 || kids[1].Dims() != 2 {
		return nil
	}
	p, f := kids[0], kids[1]
	r := m.only(mm)
	if r == nil || len(m.users[mm]) != 1 || !isReshape(r) || r.Dims() != 4 {
		return nil
	}
	t := m.only(r)
	if t == nil || len(m.users[r]) != 1 || opTypeName(t.Op()) != "transposeOp" {
		return nil
	}
	if pat, err := reach.Ints(t.Op(), "pattern"); err != nil || !slices.Equal(pat, []int{0, 3, 1, 2}) {
		return nil
	}
	s := r.Shape() // (B, H', W', C')
	if s[0]*s[1]*s[2] != p.Shape()[0] || s[3] != f.Shape()[0] || p.Shape()[1] != f.Shape()[1] {
		return nil
	}
	cg := stageops.NewConvGEMM(s[0], s[1], s[2], s[3], f.Shape()[1])
	if !m.readsLearnable(p) {
		cg = cg.WithoutPatchGrad()
	}
	return &substitution{root: t, absorbed: gorgonia.Nodes{mm, r}, leaves: gorgonia.Nodes{p, f}, build: func(k gorgonia.Nodes) (*gorgonia.Node, gorgonia.Nodes, error) {
		y, err := cg.Apply(k[0], k[1])
		return y, nil, err
	}}
}

// origin says which original node a node of a program stands for: the
// original itself (aux < 0), or the aux-th extra node of the substitution
// that computes it.
type origin struct {
	node *gorgonia.Node
	aux  int
}

func (o origin) name() string {
	if o.aux < 0 {
		return o.node.Name()
	}
	return fmt.Sprintf("%s/aux%d", o.node.Name(), o.aux)
}

// nodeOrigins maps each node of p that stands for an original to its origin.
func (p *Program) nodeOrigins() map[*gorgonia.Node]origin {
	out := make(map[*gorgonia.Node]origin, len(p.local))
	for o, l := range p.local {
		out[l] = origin{o, -1}
	}
	for o, aux := range p.aux {
		for k, l := range aux {
			out[l] = origin{o, k}
		}
	}
	return out
}

// at returns p's node for origin o.
func (p *Program) at(o origin) (*gorgonia.Node, bool) {
	if o.aux < 0 {
		l, ok := p.local[o.node]
		return l, ok
	}
	aux := p.aux[o.node]
	if o.aux >= len(aux) {
		return nil, false
	}
	return aux[o.aux], true
}
