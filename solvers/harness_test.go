package solvers_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// trainee is a model trained step by step the plain Gorgonia way (one
// tape machine, no pipeline), so that two solvers can be compared on it.
type trainee struct {
	learnables gorgonia.Nodes
	vm         gorgonia.VM
	feed       func(step int) error
}

// step runs k forward/backward passes and solver steps, from step from.
func (tr *trainee) step(t *testing.T, s gorgonia.Solver, from, k int) {
	t.Helper()
	for i := from; i < from+k; i++ {
		require.NoError(t, tr.feed(i))
		require.NoError(t, tr.vm.RunAll())
		require.NoError(t, s.Step(gorgonia.NodesToValueGrads(tr.learnables)), "step %d", i)
		tr.vm.Reset()
	}
}

func (tr *trainee) model() []gorgonia.ValueGrad { return gorgonia.NodesToValueGrads(tr.learnables) }

func newTrainee(t *testing.T, g *gorgonia.ExprGraph, cost *gorgonia.Node, learnables gorgonia.Nodes, feed func(int) error) *trainee {
	t.Helper()
	_, err := gorgonia.Grad(cost, learnables...)
	require.NoError(t, err)
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(learnables...))
	t.Cleanup(func() { vm.Close() })
	return &trainee{learnables: learnables, vm: vm, feed: feed}
}

var zooData = map[string]zoo.Data{}

// zooTrainee builds the zoo model name at microbatch batch with seed 1 and
// feeds it consecutive examples of its embedded training data.
func zooTrainee(t *testing.T, name string, batch int) *trainee {
	t.Helper()
	r, err := zoo.RecipeFor(name)
	require.NoError(t, err)
	data, ok := zooData[name]
	if !ok {
		data, _, err = r.Load("embedded", 512)
		require.NoError(t, err)
		zooData[name] = data
	}
	m, err := r.Build(batch, 1)
	require.NoError(t, err)
	return newTrainee(t, m.Graph, m.Cost, m.Learnables, func(step int) error {
		idx := make([]int, batch)
		for i := range idx {
			idx[i] = (step*batch + i) % data.Len()
		}
		x, y := data.Batch(m, idx)
		if err := gorgonia.Let(m.X, x); err != nil {
			return err
		}
		return gorgonia.Let(m.Y, y)
	})
}

// testmodelTrainee builds an internal test model with random data.
func testmodelTrainee(t *testing.T, name string, dt tensor.Dtype) *trainee {
	t.Helper()
	build, ok := testmodels.ByName(name)
	require.True(t, ok, name)
	m, err := build(dt, 4, 1)
	require.NoError(t, err)
	return newTrainee(t, m.Graph, m.Cost, m.Learnables, func(step int) error {
		for i, v := range m.Batch(rand.New(rand.NewSource(int64(step)))) {
			if err := gorgonia.Let(m.Inputs[i], v); err != nil {
				return err
			}
		}
		return nil
	})
}

// scalarTrainee is least squares with a scalar bias, a (1, 1) scale and a
// weight vector: gorgonia's scalar and scalar-like paths.
func scalarTrainee(t *testing.T, dt tensor.Dtype) *trainee {
	t.Helper()
	g := gorgonia.NewGraph()
	rng := rand.New(rand.NewSource(3)) // the weights; the data comes from the step
	val := func(shape ...int) gorgonia.Value {
		d := make([]float64, tensor.Shape(shape).TotalSize())
		for i := range d {
			d[i] = rng.NormFloat64()
		}
		if len(shape) == 0 {
			if dt == tensor.Float32 {
				return gorgonia.NewF32(float32(d[0]))
			}
			return gorgonia.NewF64(d[0])
		}
		return dense(dt, shape, d)
	}
	x := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(8, 3), gorgonia.WithName("x"))
	y := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(8, 1), gorgonia.WithName("y"))
	w := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(3, 1), gorgonia.WithName("w"), gorgonia.WithValue(val(3, 1)))
	s := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(1, 1), gorgonia.WithName("s"), gorgonia.WithValue(val(1, 1)))
	b := gorgonia.NewScalar(g, dt, gorgonia.WithName("b"), gorgonia.WithValue(val()))
	pred := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Mul(gorgonia.Must(gorgonia.Mul(x, w)), s)), b))
	cost := gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.Square(gorgonia.Must(gorgonia.Sub(pred, y))))))
	return newTrainee(t, g, cost, gorgonia.Nodes{w, s, b}, func(step int) error {
		rng.Seed(int64(step))
		if err := gorgonia.Let(x, val(8, 3)); err != nil {
			return err
		}
		return gorgonia.Let(y, val(8, 1))
	})
}

func dense(dt tensor.Dtype, shape []int, d []float64) *tensor.Dense {
	if dt == tensor.Float32 {
		f := make([]float32, len(d))
		for i, x := range d {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

// bits returns the bit patterns of every learnable's elements.
func bits(t *testing.T, learnables gorgonia.Nodes) [][]uint64 {
	t.Helper()
	out := make([][]uint64, len(learnables))
	for i, n := range learnables {
		switch d := n.Value().Data().(type) {
		case []float32:
			for _, x := range d {
				out[i] = append(out[i], uint64(math.Float32bits(x)))
			}
		case []float64:
			for _, x := range d {
				out[i] = append(out[i], math.Float64bits(x))
			}
		case float32:
			out[i] = []uint64{uint64(math.Float32bits(d))}
		case float64:
			out[i] = []uint64{math.Float64bits(d)}
		default:
			t.Fatalf("learnable %s holds %T", n.Name(), d)
		}
	}
	return out
}

// requireSameBits fails naming the first learnable whose bits differ.
func requireSameBits(t *testing.T, want, got [][]uint64, learnables gorgonia.Nodes, msg string) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Len(t, got[i], len(want[i]))
		for j := range want[i] {
			if want[i][j] != got[i][j] {
				t.Fatalf("%s: learnable %s element %d: %#x, want %#x", msg, learnables[i].Name(), j, got[i][j], want[i][j])
			}
		}
	}
}

// requireChanged guards the comparisons against solvers that do nothing.
func requireChanged(t *testing.T, before, after [][]uint64, msg string) {
	t.Helper()
	for i := range before {
		for j := range before[i] {
			if before[i][j] != after[i][j] {
				return
			}
		}
	}
	t.Fatalf("%s: training changed no weight", msg)
}

func nan() float64 { return math.NaN() }
