package tape

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// reads adds a gorgonia.Read of the net's cost, prediction and gradients.
func (n *net) reads() []G.Value {
	ns := append(G.Nodes{n.cost, n.pred}, n.grads...)
	out := make([]G.Value, len(ns))
	for i, x := range ns {
		G.Read(x, &out[i])
	}
	return out
}

func snapshot(vals []G.Value) []any {
	var out []any
	for _, v := range vals {
		switch d := v.Data().(type) {
		case []float32:
			out = append(out, fmt.Sprint(v.Shape()), append([]float32(nil), d...))
		default:
			out = append(out, fmt.Sprint(v.Shape()), d)
		}
	}
	return out
}

// TestProgramComputesWhatTheTapeComputes: the same graph run by
// gorgonia's tape machine and by a Program, several times with new inputs,
// gives the same bits and shapes, training and in evaluation mode; the
// program reuses its buffers from the third run on.
func TestProgramComputesWhatTheTapeComputes(t *testing.T) {
	for _, eval := range []bool{false, true} {
		t.Run(fmt.Sprintf("eval=%v", eval), func(t *testing.T) {
			var got [2][]any
			for i, ours := range []bool{false, true} {
				n := newNet(t)
				vals := n.reads()
				var run func() error
				if ours {
					p := Compile(n.g, eval)
					defer p.Close()
					ok, why := p.Executor()
					require.True(t, ok, "%v", why)
					run = p.Run
					defer func() { t.Logf("%+v", p.Ops()) }()
				} else {
					var opts []G.VMOpt
					if eval {
						opts = append(opts, G.EvalMode())
					}
					m := G.NewTapeMachine(n.g, opts...)
					defer m.Close()
					run = func() error { m.Reset(); return m.RunAll() }
				}
				for r := range 4 {
					xs := []float32{.1, -.2, .3, .4, -.5, .6, .7, .8, -.9, 1, 1.1, -1.2}
					for j := range xs {
						xs[j] *= float32(r + 1)
					}
					require.NoError(t, G.Let(n.x, tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(xs))))
					clear(vals)
					require.NoError(t, run())
					got[i] = append(got[i], snapshot(vals)...)
				}
			}
			require.Equal(t, got[0], got[1])
		})
	}
}

// TestProgramReturnsTheOpsError: an op that fails makes Run return its
// error, naming the node; the program runs again afterwards. A panic
// reaches the caller.
func TestProgramReturnsTheOpsError(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithBacking([]float32{1, 2, 3}))))
	op := &testOp{does: "fail"}
	y, err := G.ApplyOp(op, x)
	require.NoError(t, err)
	var got G.Value
	G.Read(y, &got)
	p := Compile(g, false)
	defer p.Close()
	err = p.Run()
	require.ErrorContains(t, err, "the op failed")
	require.ErrorContains(t, err, y.Name())

	op.does = ""
	require.NoError(t, p.Run())
	require.Equal(t, []float32{1, 2, 3}, got.Data())

	op.does = "panic"
	require.PanicsWithValue(t, "boom", func() { _ = p.Run() })
}

// TestProgramRunsWhatItCannotReuseThroughDo: an op without a variant that
// writes into a buffer runs through Do at every run and is listed among
// the fallbacks, with why; a view of an input is not.
func TestProgramRunsWhatItCannotReuseThroughDo(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"), G.WithValue(ramp(2, 3, 1)))
	y, err := G.ApplyOp(&testOp{}, x) // Do clones: a fresh tensor every run
	require.NoError(t, err)
	v, err := G.Transpose(x) // a new tensor every run, no variant either
	require.NoError(t, err)
	s, err := G.Reshape(x, tensor.Shape{3, 2}) // a view of x
	require.NoError(t, err)
	var vals [3]G.Value
	for i, n := range []*G.Node{y, v, s} {
		G.Read(n, &vals[i])
	}
	p := Compile(g, false)
	defer p.Close()
	for range 3 {
		require.NoError(t, p.Run())
	}
	var fell []string
	for _, o := range p.Fallbacks() {
		fell = append(fell, fmt.Sprintf("%v: %s", o.Op, o.Why))
	}
	require.Equal(t, []string{"testOp: it has no variant that writes into a given buffer", "Aᵀ{1, 0}: it has no variant that writes into a given buffer"}, fell)
	require.Equal(t, "view", p.Ops()[2].How, "%+v", p.Ops()[2])
}
