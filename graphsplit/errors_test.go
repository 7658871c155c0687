package graphsplit

import (
	"fmt"
	"hash"
	"hash/fnv"
	"testing"

	"github.com/chewxy/hm"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// tinyModel is x(4,3)·w1 → tanh → ·w2 → mean, with an unused learnable.
type tinyModel struct {
	g            *G.ExprGraph
	x, w1, w2    *G.Node
	unused       *G.Node
	hidden, cost *G.Node
}

func newTiny(t testing.TB) *tinyModel {
	m := &tinyModel{g: G.NewGraph()}
	m.x = G.NewMatrix(m.g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"))
	m.w1 = G.NewMatrix(m.g, tensor.Float64, G.WithShape(3, 5), G.WithName("w1"), G.WithInit(G.GlorotU(1)))
	m.w2 = G.NewMatrix(m.g, tensor.Float64, G.WithShape(5, 2), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
	m.unused = G.NewMatrix(m.g, tensor.Float64, G.WithShape(2, 2), G.WithName("unused"), G.WithInit(G.GlorotU(1)))
	var err error
	m.hidden, err = G.Tanh(G.Must(G.Mul(m.x, m.w1)))
	require.NoError(t, err)
	G.WithName("hidden")(m.hidden)
	m.cost, err = G.Mean(G.Must(G.Mul(m.hidden, m.w2)))
	require.NoError(t, err)
	return m
}

func TestSplitRejectsBadInput(t *testing.T) {
	m := newTiny(t)
	other := newTiny(t)
	learn := G.Nodes{m.w1, m.w2}
	cases := []struct {
		name  string
		split func() (*Plan, error)
		want  string
	}{
		{"cost not scalar", func() (*Plan, error) { return Split(m.g, m.hidden, learn) }, `cost "hidden" has shape (4, 5), want a scalar`},
		{"cost from another graph", func() (*Plan, error) { return Split(m.g, other.cost, learn) }, "belongs to another graph"},
		{"nil cost", func() (*Plan, error) { return Split(m.g, nil, learn) }, "cost node is nil"},
		{"nil graph", func() (*Plan, error) { return Split(nil, m.cost, learn) }, "graph is nil"},
		{"no learnables", func() (*Plan, error) { return Split(m.g, m.cost, nil) }, "no learnables"},
		{"learnable the cost does not depend on", func() (*Plan, error) { return Split(m.g, m.cost, G.Nodes{m.w1, m.w2, m.unused}) }, `does not depend on learnable "unused"`},
		{"learnable from another graph", func() (*Plan, error) { return Split(m.g, m.cost, G.Nodes{m.w1, other.w2}) }, `learnable 1 ("w2") belongs to another graph`},
		{"learnable computed by an op", func() (*Plan, error) { return Split(m.g, m.cost, G.Nodes{m.w1, m.hidden}) }, `learnable 1 ("hidden") is computed by op`},
		{"learnable listed twice", func() (*Plan, error) { return Split(m.g, m.cost, G.Nodes{m.w1, m.w2, m.w1}) }, `learnable "w1" is listed twice`},
		{"zero stages", func() (*Plan, error) { return Split(m.g, m.cost, learn, Stages(0)) }, "Stages(0): need at least one stage"},
		{"negative stages", func() (*Plan, error) { return Split(m.g, m.cost, learn, Stages(-2)) }, "Stages(-2): need at least one stage"},
		{"more stages than cuts", func() (*Plan, error) { return Split(m.g, m.cost, learn, Stages(50)) }, "Stages(50): the graph has only"},
		{"more stages than layers", func() (*Plan, error) { return Split(m.g, m.cost, learn, FineGrained(), Stages(3)) }, "only 1 layer boundaries"},
		{"unknown cut point", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAt("no-such-node")) }, `cut point "no-such-node": no node of that name`},
		{"cut point at an input", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAt("x")) }, `cut point "x": it is an input`},
		{"cut point twice", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAt("hidden", "hidden")) }, "are the same node"},
		{"cut points with stages", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAt("hidden"), Stages(2)) }, "CutAt and CutAtOps cannot be combined with Stages"},
		{"cut positions with a profile", func() (*Plan, error) {
			return Split(m.g, m.cost, learn, CutAtOps(1), Profiled(nil, false, false), Stages(2))
		}, "cannot be combined"},
		{"cut points twice over", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAt("hidden"), CutAtOps(1)) }, "CutAt and CutAtOps both give cut points"},
		{"cut position out of range", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAtOps(0)) }, "CutAtOps([0]): position 0 is not between 1 and"},
		{"cut position twice", func() (*Plan, error) { return Split(m.g, m.cost, learn, CutAtOps(1, 1)) }, "position 1 is given twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := c.split()
			require.Error(t, err)
			require.Nil(t, plan)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// TestTooManyStagesSaysTheMost: more stages than places to cut is a
// *TooManyStagesError with the most the graph can be cut into.
func TestTooManyStagesSaysTheMost(t *testing.T) {
	m := newTiny(t)
	_, err := Split(m.g, m.cost, G.Nodes{m.w1, m.w2}, FineGrained(), Stages(3))
	var tm *TooManyStagesError
	require.ErrorAs(t, err, &tm)
	require.Equal(t, TooManyStagesError{Asked: 3, Most: 2, where: tm.where}, *tm)
	require.EqualError(t, err, "graphsplit: Stages(3): the graph has only 1 layer boundaries (FineGrained), so at most 2 stages")
}

func TestCutAtSplitsThere(t *testing.T) {
	m := newTiny(t)
	plan, err := Split(m.g, m.cost, G.Nodes{m.w1, m.w2}, CutAt("hidden"))
	require.NoError(t, err)
	require.Len(t, plan.Stages, 2)
	require.Equal(t, m.hidden, plan.Stages[1].Nodes[0])
	require.Equal(t, G.Nodes{m.w1}, plan.Stages[0].Learnables)
	require.Equal(t, G.Nodes{m.w2}, plan.Stages[1].Learnables)
}

// identityOp is an identity op for tests, without a symbolic derivative (it
// does not implement gorgonia.SDOp). With applied set it can be applied
// once only, as an op with one-shot state; with panics its Do panics.
type identityOp struct {
	name    string
	applied *int
	panics  bool
}

func (op identityOp) Arity() int { return 1 }
func (op identityOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (op identityOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	if op.applied != nil {
		if *op.applied++; *op.applied > 1 {
			return nil, fmt.Errorf("%s op was already applied", op.name)
		}
	}
	return ds[0].(tensor.Shape).Clone(), nil
}
func (op identityOp) Do(v ...G.Value) (G.Value, error) {
	if op.panics {
		panic("boom in " + op.name)
	}
	return v[0].(tensor.Tensor).Clone().(G.Value), nil
}
func (op identityOp) ReturnsPtr() bool      { return false }
func (op identityOp) CallsExtern() bool     { return false }
func (op identityOp) OverwritesInput() int  { return -1 }
func (op identityOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%s%v", op.name, op.panics) }
func (op identityOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op identityOp) String() string { return op.name }

// diffOp is an identityOp with a symbolic derivative: the gradient passes
// through, or with panicGrad through an op whose Do panics.
type diffOp struct {
	identityOp
	panicGrad bool
}

func (op diffOp) DiffWRT(int) []bool { return []bool{true} }
func (op diffOp) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	if !op.panicGrad {
		return G.Nodes{grad}, nil
	}
	n, err := G.ApplyOp(identityOp{name: op.name + "-gradient", panics: true}, grad)
	return G.Nodes{n}, err
}

func TestOpThatCannotBeReappliedIsNamed(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	n := 0
	f, err := G.ApplyOpWithName(diffOp{identityOp: identityOp{name: "flaky", applied: &n}}, "the-flaky-node", G.Must(G.Mul(x, w)))
	require.NoError(t, err)
	cost := G.Must(G.Mean(f))
	plan, err := Split(g, cost, G.Nodes{w})
	require.Error(t, err)
	require.Nil(t, plan)
	require.Contains(t, err.Error(), `op flaky`)
	require.Contains(t, err.Error(), `node "the-flaky-node"`)
}

func TestRandomOpsAreRefused(t *testing.T) {
	g := G.NewGraph()
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	r := G.UniformRandomNode(g, tensor.Float64, 0, 1, 3, 3)
	cost := G.Must(G.Mean(G.Must(G.HadamardProd(w, r))))
	_, err := Split(g, cost, G.Nodes{w})
	require.Error(t, err)
	require.Contains(t, err.Error(), "random ops cannot be split")
}

// TestOpWithoutDerivativeIsNamed: gorgonia's backward indexes the answer of
// every op's DiffWRT; an op without one used to give "index out of range".
// Split names the node and the op, wherever the op sits: on the path to a
// learnable, or on data only (gorgonia's backward visits it all the same).
func TestOpWithoutDerivativeIsNamed(t *testing.T) {
	for _, onData := range []bool{false, true} {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
		w2 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w2"), G.WithInit(G.GlorotU(1)))
		var h *G.Node
		var err error
		if onData {
			h, err = G.ApplyOpWithName(identityOp{name: "opaque"}, "the-opaque-node", x)
			require.NoError(t, err)
			h = G.Must(G.Mul(h, w))
		} else {
			h, err = G.ApplyOpWithName(identityOp{name: "opaque"}, "the-opaque-node", G.Must(G.Mul(x, w)))
			require.NoError(t, err)
		}
		cost := G.Must(G.Mean(G.Must(G.Mul(h, w2))))
		for _, opts := range [][]Option{nil, {Stages(2)}, {FineGrained()}} {
			plan, err := Split(g, cost, G.Nodes{w, w2}, opts...)
			require.Error(t, err)
			require.Nil(t, plan)
			require.Contains(t, err.Error(), `node "the-opaque-node": op opaque (graphsplit.identityOp) has no symbolic derivative`)
			require.NotContains(t, err.Error(), "index out of range")
		}
	}
}

// TestScalarDataInputIsRefused: a pipeline cuts data into microbatches along
// the first axis, which a scalar lacks; it used to pass Split and fail every
// step.
func TestScalarDataInputIsRefused(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	temp := G.NewScalar(g, tensor.Float64, G.WithName("temperature"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	cost := G.Must(G.Mul(G.Must(G.Mean(G.Must(G.Mul(x, w)))), temp))
	plan, err := Split(g, cost, G.Nodes{w})
	require.Nil(t, plan)
	require.ErrorContains(t, err, `data input "temperature" is a scalar`)
	// A one-element batch axis is fine.
	g = G.NewGraph()
	x = G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	temp = G.NewVector(g, tensor.Float64, G.WithShape(1), G.WithName("temperature"))
	w = G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	cost = G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Mean(G.Must(G.Mul(x, w)))), temp))))
	plan, err = Split(g, cost, G.Nodes{w})
	require.NoError(t, err)
	require.NoError(t, plan.Close())
}

// TestDropoutIsRefused: gorgonia's Dropout draws from a clock-seeded
// generator, so two identical trainings would differ.
func TestDropoutIsRefused(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"), G.WithInit(G.GlorotU(1)))
	d := G.Must(G.Dropout(G.Must(G.Mul(x, w)), 0.5))
	G.WithName("the-dropout")(d)
	cost := G.Must(G.Mean(d))
	plan, err := Split(g, cost, G.Nodes{w}, FineGrained())
	require.Nil(t, plan)
	require.ErrorContains(t, err, `node "the-dropout" is gorgonia's Dropout`)
	require.ErrorContains(t, err, "asyncvm.WithDropoutMask")
}
