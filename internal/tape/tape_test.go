package tape

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"testing"

	"github.com/chewxy/hm"
	"github.com/pipemare/pipemare/internal/reach"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestDirectInThisBuild: the module pins the gorgonia release whose
// executor Machine calls, so every test of the repository runs the direct
// path. Changing the release fails here: read its (*tapeMachine).runall
// and RunAll again before changing reach.Version.
func TestDirectInThisBuild(t *testing.T) {
	require.True(t, Direct(), "gorgonia is not %s: Machine falls back to RunAll", reach.Version)
	n := newNet(t)
	m := New(n.g, false)
	defer m.Close()
	require.NotNil(t, m.tape)
}

// net is a small layer with its symbolic backward: cost = mean(tanh(x·w + b)²).
type net struct {
	g          *G.ExprGraph
	x, w, b    *G.Node
	cost, pred *G.Node
	grads      G.Nodes
}

func newNet(t testing.TB) *net {
	g := G.NewGraph()
	n := &net{g: g}
	n.x = G.NewMatrix(g, tensor.Float32, G.WithShape(4, 3), G.WithName("x"))
	n.w = G.NewMatrix(g, tensor.Float32, G.WithShape(3, 5), G.WithName("w"), G.WithValue(ramp(3, 5, 0.1)))
	n.b = G.NewMatrix(g, tensor.Float32, G.WithShape(4, 5), G.WithName("b"), G.WithValue(ramp(4, 5, -0.05)))
	n.pred = G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(n.x, n.w)), n.b))))
	n.cost = G.Must(G.Mean(G.Must(G.Square(n.pred))))
	var err error
	n.grads, err = G.Grad(n.cost, n.w, n.b)
	require.NoError(t, err)
	return n
}

// ramp is an r×c matrix of small values that differ: k·sin(i).
func ramp(r, c int, k float32) *tensor.Dense {
	xs := make([]float32, r*c)
	for i := range xs {
		xs[i] = k * float32(math.Sin(float64(i)))
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(xs))
}

// values are copies of the net's cost, prediction and gradients.
func (n *net) values() []any {
	out := []any{n.cost.Value().Data()}
	for _, v := range append(G.Nodes{n.pred}, n.grads...) {
		out = append(out, append([]float32(nil), v.Value().Data().([]float32)...))
	}
	return out
}

// TestMachineComputesWhatRunAllComputes: the same graph, run by gorgonia's
// RunAll and by a Machine, twice each with new inputs between, gives the
// same bits, training and in evaluation mode.
func TestMachineComputesWhatRunAllComputes(t *testing.T) {
	for _, eval := range []bool{false, true} {
		t.Run(fmt.Sprintf("eval=%v", eval), func(t *testing.T) {
			var got [2][]any
			for i, ours := range []bool{false, true} {
				n := newNet(t)
				var vm G.VM
				switch {
				case ours:
					vm = New(n.g, eval)
				case eval:
					vm = G.NewTapeMachine(n.g, G.EvalMode())
				default:
					vm = G.NewTapeMachine(n.g)
				}
				for run := range 2 {
					xs := []float32{.1, -.2, .3, .4, -.5, .6, .7, .8, -.9, 1, 1.1, -1.2}
					for j := range xs {
						xs[j] *= float32(run + 1)
					}
					x := tensor.New(tensor.WithShape(4, 3), tensor.WithBacking(xs))
					require.NoError(t, G.Let(n.x, x))
					vm.Reset()
					require.NoError(t, vm.RunAll())
					got[i] = append(got[i], n.values()...)
				}
				vm.Close()
			}
			require.Equal(t, got[0], got[1])
		})
	}
}

// TestMachineReturnsTheInstructionsError: an op that fails makes RunAll
// return its error, naming the instruction; after Reset the machine runs
// again.
func TestMachineReturnsTheInstructionsError(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithBacking([]float32{1, 2, 3}))))
	op := &testOp{does: "fail"}
	y, err := G.ApplyOp(op, x)
	require.NoError(t, err)
	m := New(g, false)
	defer m.Close()
	err = m.RunAll()
	require.ErrorContains(t, err, "Failed to execute instruction")
	require.ErrorContains(t, err, "the op failed")

	op.does = ""
	m.Reset()
	require.NoError(t, m.RunAll())
	require.Equal(t, []float32{1, 2, 3}, y.Value().Data())
}

// TestAPanicReachesTheCaller: on the caller's goroutine an op's panic can
// be recovered (in RunAll's goroutine it ended the process).
func TestAPanicReachesTheCaller(t *testing.T) {
	g := G.NewGraph()
	x := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("x"), G.WithInit(G.Zeroes()))
	_, err := G.ApplyOp(&testOp{does: "panic"}, x)
	require.NoError(t, err)
	m := New(g, false)
	defer m.Close()
	require.PanicsWithValue(t, "boom", func() { _ = m.RunAll() })
}

// testOp is an identity op that fails or panics as told.
type testOp struct{ does string }

func (*testOp) Arity() int { return 1 }
func (*testOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (*testOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	return ds[0].(tensor.Shape).Clone(), nil
}
func (op *testOp) Do(v ...G.Value) (G.Value, error) {
	switch op.does {
	case "panic":
		panic("boom")
	case "fail":
		return nil, errors.New("the op failed")
	}
	return v[0].(tensor.Tensor).Clone().(G.Value), nil
}
func (*testOp) ReturnsPtr() bool      { return false }
func (*testOp) CallsExtern() bool     { return false }
func (*testOp) OverwritesInput() int  { return -1 }
func (*testOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "testOp") }
func (op *testOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (*testOp) String() string { return "testOp" }

// BenchmarkRunAll runs the small layer's training program with gorgonia's
// RunAll, with a Machine and with a Program (the executor), its cost,
// prediction and gradients read out: the per-run cost a fine-grained stage
// pays. Compare with benchstat, pinned to one thread and on two:
//
//	GOMAXPROCS=1 taskset -c 1 go test -run '^$' -bench RunAll -benchmem -count 10 ./internal/tape/
//	GOMAXPROCS=2 go test -run '^$' -bench RunAll -benchmem -count 10 ./internal/tape/
//
// Measurements are in docs/executor.md.
func BenchmarkRunAll(b *testing.B) {
	for _, name := range []string{"gorgonia", "machine", "program"} {
		b.Run(name, func(b *testing.B) {
			n := newNet(b)
			require.NoError(b, G.Let(n.x, ramp(4, 3, 1)))
			vals := n.reads()
			var run func() error
			switch name {
			case "program":
				p := Compile(n.g, false)
				defer p.Close()
				run = p.Run
			default:
				var vm G.VM = G.NewTapeMachine(n.g)
				if name == "machine" {
					vm = New(n.g, false)
				}
				defer vm.Close()
				run = func() error { vm.Reset(); return vm.RunAll() }
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(vals)
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
