package asyncvm

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// data is a deterministic stream of microbatches for a model.
type data struct {
	micro [][]gorgonia.Value // per microbatch, parallel to model.Inputs
}

func makeData(m *testmodels.Model, microbatches int, seed int64) data {
	rng := rand.New(rand.NewSource(seed))
	d := data{}
	for i := 0; i < microbatches; i++ {
		d.micro = append(d.micro, m.Batch(rng))
	}
	return d
}

// minibatch concatenates microbatches [k·n, k·n+n) along axis 0, keyed by the
// model's input nodes.
func (d data) minibatch(t testing.TB, inputs gorgonia.Nodes, k, n int) map[*gorgonia.Node]gorgonia.Value {
	out := map[*gorgonia.Node]gorgonia.Value{}
	for i, in := range inputs {
		shape := in.Shape().Clone()
		rows := shape[0]
		shape[0] *= n
		full := tensorutil.Zeros(in.Dtype(), shape)
		row := in.Shape().TotalSize() / rows
		for j := 0; j < n; j++ {
			src := d.micro[k*n+j][i]
			switch f := full.Data().(type) {
			case []float64:
				copy(f[j*rows*row:], src.Data().([]float64))
			case []float32:
				copy(f[j*rows*row:], src.Data().([]float32))
			}
		}
		out[in] = full
	}
	return out
}

// plainTraining trains m with plain Gorgonia: the whole graph, a tape
// machine, gradients accumulated over n microbatches as a mean, one solver.
// It returns the learnables' values after steps minibatches.
func plainTraining(t testing.TB, m *testmodels.Model, d data, n, steps int, solver gorgonia.Solver) []gorgonia.Value {
	grads, err := gorgonia.Grad(m.Cost, m.Learnables...)
	require.NoError(t, err)
	gv := make([]gorgonia.Value, len(grads))
	for i, g := range grads {
		gorgonia.Read(g, &gv[i])
	}
	vm := gorgonia.NewTapeMachine(m.Graph)
	defer vm.Close()
	acc := make([]*tensor.Dense, len(m.Learnables))
	model := make([]gorgonia.ValueGrad, len(m.Learnables))
	for i, l := range m.Learnables {
		acc[i] = tensorutil.Zeros(l.Dtype(), l.Shape())
		model[i] = &valueGrad{name: l.Name(), value: l.Value(), grad: acc[i]}
	}
	for k := 0; k < steps; k++ {
		for j := 0; j < n; j++ {
			for i, in := range m.Inputs {
				v, err := tensorutil.Clone(d.micro[k*n+j][i])
				require.NoError(t, err)
				require.NoError(t, gorgonia.Let(in, v))
			}
			for i := range gv {
				gv[i] = nil
			}
			vm.Reset()
			require.NoError(t, vm.RunAll())
			for i, g := range gv {
				require.NoError(t, tensorutil.AddInto(acc[i], g))
			}
		}
		for _, a := range acc {
			scaleInPlace(a, 1/float64(n))
		}
		require.NoError(t, solver.Step(model))
		for _, a := range acc {
			a.Zero()
		}
	}
	out := make([]gorgonia.Value, len(m.Learnables))
	for i, l := range m.Learnables {
		c, err := tensorutil.Clone(l.Value())
		require.NoError(t, err)
		out[i] = c
	}
	return out
}

func scaleInPlace(t *tensor.Dense, s float64) {
	switch d := t.Data().(type) {
	case []float64:
		for i := range d {
			d[i] *= s
		}
	case []float32:
		for i := range d {
			d[i] *= float32(s)
		}
	}
}

// pipelineTraining trains m split by opts with the engine and returns the
// learnables after steps minibatches and a flush.
func pipelineTraining(t testing.TB, m *testmodels.Model, d data, n, steps int, split []graphsplit.Option, opts ...Option) ([]gorgonia.Value, *VM) {
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, split...)
	require.NoError(t, err)
	vm, err := New(plan, append([]Option{WithMicrobatches(n)}, opts...)...)
	require.NoError(t, err)
	ctx := context.Background()
	for k := 0; k < steps; k++ {
		loss, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
		require.False(t, math.IsNaN(loss))
	}
	require.NoError(t, vm.Flush(ctx))
	out := make([]gorgonia.Value, len(m.Learnables))
	for i, l := range m.Learnables {
		c, err := tensorutil.Clone(l.Value())
		require.NoError(t, err)
		out[i] = c
	}
	return out, vm
}

func bitsEqual(a, b []gorgonia.Value) bool {
	for i := range a {
		switch x := a[i].Data().(type) {
		case []float64:
			y := b[i].Data().([]float64)
			for j := range x {
				if math.Float64bits(x[j]) != math.Float64bits(y[j]) {
					return false
				}
			}
		case []float32:
			y := b[i].Data().([]float32)
			for j := range x {
				if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
					return false
				}
			}
		}
	}
	return true
}

// valueGrad is what plain training's solver steps.
type valueGrad struct {
	name        string
	value, grad gorgonia.Value
}

func (v *valueGrad) Value() gorgonia.Value         { return v.value }
func (v *valueGrad) Grad() (gorgonia.Value, error) { return v.grad, nil }
func (v *valueGrad) Name() string                  { return v.name }

// fineMLP is a fresh float64 test MLP (microbatch 4), cut one stage per
// layer, and a VM that trains it with n microbatches and opts, closed with
// the test.
func fineMLP(t testing.TB, n int, opts ...Option) (*testmodels.Model, *VM) {
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan, append([]Option{WithMicrobatches(n)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = vm.Close() })
	return m, vm
}
