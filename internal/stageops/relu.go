package stageops

import (
	"fmt"
	"math"

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
func mask[T float](v T) T {
	if v >= 0 {
		return 1
	}
	return 0
}

// mask32 and mask64 are mask without a branch (signs are data: a
// mispredicted branch per element cost more than the arithmetic): 1 for a
// clear sign bit or a zero, 0 for NaN.
func mask32(v float32) float32 {
	b := math.Float32bits(v)
	u := b & 0x7fffffff
	nan, zero := (0x7f800000-u)>>31, (u-1)>>31
	return float32((b>>31 ^ 1 | zero) & (nan ^ 1))
}

func mask64(v float64) float64 {
	b := math.Float64bits(v)
	u := b & 0x7fffffffffffffff
	nan, zero := (0x7ff0000000000000-u)>>63, (u-1)>>63
	return float64((b>>63 ^ 1 | zero) & (nan ^ 1))
}

// reluKernel is y = x·mask(x), or with a gradient dy·mask(x).
func reluKernel[T float](out []T, in [][]T) {
	var dy []T
	if len(in) > 1 {
		dy = in[1]
	}
	switch o := any(out).(type) {
	case []float32:
		x, dy := any(in[0]).([]float32), any(dy).([]float32)
		if dy == nil {
			for i, v := range x {
				o[i] = v * mask32(v)
			}
			return
		}
		for i, v := range x {
			o[i] = dy[i] * mask32(v)
		}
	case []float64:
		x, dy := any(in[0]).([]float64), any(dy).([]float64)
		if dy == nil {
			for i, v := range x {
				o[i] = v * mask64(v)
			}
			return
		}
		for i, v := range x {
			o[i] = dy[i] * mask64(v)
		}
	}
}
