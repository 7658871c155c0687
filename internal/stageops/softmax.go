package stageops

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/chewxy/math32"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// SoftMax builds gorgonia.SoftMax (log false) or gorgonia.LogSoftMax (log
// true) of x along its last axis, computing the rows on the goroutine that
// runs the op: gorgonia's kernel (tensor's StdEng) starts one goroutine per
// row, which for the rows of an attention's scores (one per query) cost
// more than the arithmetic. Values and gradients are gorgonia's bit for
// bit: the same arithmetic in the same order, down to the shift of every
// row starting from the tensor's first element rather than the row's
// (the result does not depend on the shift, its rounding does).
func SoftMax(x *gorgonia.Node, log bool) (*gorgonia.Node, error) {
	desc := fmt.Sprintf("softmax%v", x.Shape())
	if log {
		desc = "log" + desc
	}
	return gorgonia.ApplyOp(&softmax{named{desc}, x.Shape().Clone(), log, false}, x)
}

// softmax is SoftMax (grad false: input x) or its gradient (grad true:
// inputs y = SoftMax(x) and dy).
type softmax struct {
	named
	shape     tensor.Shape
	log, grad bool
}

func (op *softmax) Arity() int {
	if op.grad {
		return 2
	}
	return 1
}
func (op *softmax) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(a, a, a)
	}
	return hm.NewFnType(a, a)
}
func (op *softmax) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.shape.Clone(), nil
}
func (op *softmax) DiffWRT(n int) []bool {
	if op.grad {
		return make([]bool, n)
	}
	return []bool{true}
}

// SymDiff reads the forward's output, as gorgonia's softmaxDiffOp does (it
// also takes x, which it does not read).
func (op *softmax) SymDiff(_ gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.grad {
		return nil, op.errorf("no second derivative")
	}
	d, err := gorgonia.ApplyOp(&softmax{named{"grad-" + op.desc}, op.shape, op.log, true}, output, grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{d}, nil
}

func (op *softmax) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *softmax) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		want := []tensor.Shape{op.shape, op.shape}[:op.Arity()]
		ts, err := op.denseInputs(vals, want...)
		if err != nil {
			return nil, err
		}
		out := output(prealloc, ts[0], op.shape, false)
		switch ts[0].Dtype() {
		case tensor.Float32:
			softmaxKernel(op, out.Float32s(), floats[float32](ts), math32.Exp, math32.Log)
		default:
			softmaxKernel(op, out.Float64s(), floats[float64](ts), math.Exp, math.Log)
		}
		return out, nil
	})
}

// softmaxKernel computes op's rows of the last axis, in chunks when they
// are worth it (parallel): the forward from in = [x], the gradient from
// in = [y, dy].
func softmaxKernel[T float](op *softmax, out []T, in [][]T, exp, ln func(T) T) {
	d := op.shape[len(op.shape)-1]
	parallel(op.shape.TotalSize()/max(d, 1), 4*d, func(lo, hi int) {
		if op.grad {
			softmaxGradRows(out, in[0], in[1], lo, hi, d, op.log, exp)
		} else {
			softmaxRows(out, in[0], lo, hi, d, op.log, exp, ln)
		}
	})
}

// softmaxRows is tensor's softMaxLastDim over rows [lo, hi) of d elements:
// the shift starts from x[0] and runs over each row's elements 1…d−1.
func softmaxRows[T float](out, x []T, lo, hi, d int, log bool, exp, ln func(T) T) {
	for r := lo; r < hi; r++ {
		row, o := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		shift := x[0]
		for j := 1; j < d; j++ {
			if row[j] > shift {
				shift = row[j]
			}
		}
		var sum T
		for j, v := range row {
			z := v - shift
			e := exp(z)
			if log {
				o[j] = z
			} else {
				o[j] = e
			}
			sum += e
		}
		if !log {
			sum = 1 / sum
		}
		for j := range o {
			if log {
				o[j] -= ln(sum)
			} else {
				o[j] *= sum
			}
		}
	}
}

// softmaxGradRows is tensor's softMaxBLastDim over rows [lo, hi): the
// gradient at x from y and dy.
func softmaxGradRows[T float](out, y, dy []T, lo, hi, d int, log bool, exp func(T) T) {
	for r := lo; r < hi; r++ {
		yr, g, o := y[r*d:(r+1)*d], dy[r*d:(r+1)*d], out[r*d:(r+1)*d]
		if log {
			sum := g[0]
			for j := 1; j < d; j++ {
				sum += g[j]
			}
			for j := range o {
				o[j] = g[j] - (exp(yr[j]) * sum)
			}
			continue
		}
		var sum T
		for j := range o {
			sum += yr[j] * g[j]
		}
		for j := range o {
			o[j] = (g[j] - sum) * yr[j]
		}
	}
}
