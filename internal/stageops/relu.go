package stageops

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ReLU builds gorgonia.Rectify of x — in gorgonia two ops, x ⊙ (x ≥ 0) with
// the comparison returning 1 or 0 — as one op. Values are x·1 or x·0 and the
// gradient dy·1 or dy·0, as gorgonia's (so −0 for negative inputs, NaN for
// NaN).
func ReLU(x *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(&relu{named{fmt.Sprintf("relu%v", x.Shape())}, x.Shape().Clone(), false}, x)
}

// relu is Rectify (grad false: inputs x) or its gradient (grad true:
// inputs x, dy).
type relu struct {
	named
	shape tensor.Shape
	grad  bool
}

func (op *relu) Arity() int {
	if op.grad {
		return 2
	}
	return 1
}
func (op *relu) Type() hm.Type {
	if op.grad {
		return hm.NewFnType(hm.TypeVariable('a'), hm.TypeVariable('a'), hm.TypeVariable('a'))
	}
	return hm.NewFnType(hm.TypeVariable('a'), hm.TypeVariable('a'))
}
func (op *relu) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.shape.Clone(), nil
}
func (op *relu) DiffWRT(n int) []bool {
	if op.grad {
		return make([]bool, n)
	}
	return []bool{true}
}
func (op *relu) SymDiff(inputs gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.grad {
		return nil, op.errorf("no second derivative")
	}
	d, err := gorgonia.ApplyOp(&relu{named{"grad-" + op.desc}, op.shape, true}, inputs[0], grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{d}, nil
}

func (op *relu) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *relu) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		want := []tensor.Shape{op.shape, op.shape}[:op.Arity()]
		ts, err := op.denseInputs(vals, want...)
		if err != nil {
			return nil, err
		}
		out := output(prealloc, ts[0], ts[0].Shape(), false)
		switch ts[0].Dtype() {
		case tensor.Float32:
			reluKernel(out.Float32s(), floats[float32](ts))
		default:
			reluKernel(out.Float64s(), floats[float64](ts))
		}
		return out, nil
	})
}

// mask is gorgonia's Rectify mask: 1 where v ≥ 0, else 0 (NaN included).
// A value times it is gorgonia's, bit for bit (v·1 is v, NaN payloads
// too). It compiles to a compare and a set, not a branch: signs are data,
// and a mispredicted branch per element cost more than the arithmetic.
func mask[T float](v T) T {
	var k int
	if v >= 0 {
		k = 1
	}
	return T(k)
}

// reluKernel is y = x·mask(x), or with a gradient dy·mask(x).
func reluKernel[T float](out []T, in [][]T) {
	x := in[0]
	if len(in) == 1 {
		for i, v := range x {
			out[i] = v * mask(v)
		}
		return
	}
	dy := in[1]
	for i, v := range x {
		out[i] = dy[i] * mask(v)
	}
}
