package stageops

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BiasAdd builds x + bias broadcast along axes (increasing, not axis 1):
// bias holds one value per index of x's axis 1, as gorgonia.BroadcastAdd of
// a (1, n) bias over (B, n) rows, or of a (1, C, 1, 1) one over (B, C, H,
// W). It replaces gorgonia's Repeats of the bias (which materialise a tensor
// of x's size) and the + after them. The gradient of x is the output
// gradient itself and that of bias its sum along axes, last axis first, as
// gorgonia's Repeat gradients sum.
func BiasAdd(x, bias *gorgonia.Node, axes []int) (*gorgonia.Node, error) {
	s := x.Shape()
	if s.Dims() < 2 || bias.Shape().TotalSize() != s[1] {
		return nil, errors.Errorf("stageops: bias %v for %v: want one value per index of axis 1", bias.Shape(), s)
	}
	if err := checkAxes(axes, s); err != nil {
		return nil, err
	}
	op := &biasAdd{named{fmt.Sprintf("biasadd%v%v", s, axes)}, s.Clone(), bias.Shape().Clone(), axes, false}
	return gorgonia.ApplyOp(op, x, bias)
}

// biasAdd is x + bias (grad false: inputs x, bias) or the gradient of bias
// (grad true: input dy).
type biasAdd struct {
	named
	shape, bias tensor.Shape
	axes        []int
	grad        bool
}

func (op *biasAdd) Arity() int {
	if op.grad {
		return 1
	}
	return 2
}
func (op *biasAdd) Type() hm.Type {
	if op.grad {
		return fnType(op.bias.Dims(), op.shape.Dims())
	}
	return fnType(op.shape.Dims(), op.shape.Dims(), op.bias.Dims())
}
func (op *biasAdd) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	if op.grad {
		return op.bias.Clone(), nil
	}
	return op.shape.Clone(), nil
}
func (op *biasAdd) DiffWRT(n int) []bool {
	if op.grad {
		return make([]bool, n)
	}
	return []bool{true, true}
}
func (op *biasAdd) SymDiff(_ gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.grad {
		return nil, op.errorf("no second derivative")
	}
	db, err := gorgonia.ApplyOp(&biasAdd{named{"grad-" + op.desc}, op.shape, op.bias, op.axes, true}, grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{grad, db}, nil
}

func (op *biasAdd) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *biasAdd) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		want := []tensor.Shape{op.shape, op.bias}[:op.Arity()]
		ts, err := op.denseInputs(vals, want...)
		if err != nil {
			return nil, err
		}
		x := ts[0]
		if op.grad {
			out := output(prealloc, x, op.bias, false)
			switch x.Dtype() {
			case tensor.Float32:
				copy(out.Float32s(), sumAlong(x.Float32s(), op.shape, op.axes))
			default:
				copy(out.Float64s(), sumAlong(x.Float64s(), op.shape, op.axes))
			}
			return out, nil
		}
		b := ts[1]
		y := output(prealloc, x, op.shape, false)
		switch x.Dtype() {
		case tensor.Float32:
			biasKernel(y.Float32s(), x.Float32s(), b.Float32s(), op.shape)
		default:
			biasKernel(y.Float64s(), x.Float64s(), b.Float64s(), op.shape)
		}
		return y, nil
	})
}

// biasKernel is y = x + bias[index along axis 1].
func biasKernel[T float](y, x, bias []T, shape tensor.Shape) {
	n := shape[1]
	inner := shape.TotalSize() / (shape[0] * n)
	if inner == 1 { // rows of a dense layer: one pass per row
		for o := 0; o < shape[0]; o++ {
			yr, xr := y[o*n:(o+1)*n], x[o*n:(o+1)*n]
			for c, b := range bias[:n] {
				yr[c] = xr[c] + b
			}
		}
		return
	}
	for o := 0; o < shape[0]; o++ {
		for c, b := range bias {
			at := (o*n + c) * inner
			for i, v := range x[at : at+inner] {
				y[at+i] = v + b
			}
		}
	}
}
