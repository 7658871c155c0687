package stageops

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/pipemare/pipemare/internal/reach"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MaxPool is gorgonia's MaxPool2D as a stage computes it: the argmax of
// every window is a node of its own (the index within the input plane, held
// in the input's dtype) that the forward computes and the backward reads,
// instead of the mask gorgonia's op keeps in its object between its Do and
// the backward.
type MaxPool struct {
	b, c, h, w     int // input
	kh, kw         int
	padH, padW     int // the padding gorgonia's loop applies
	strideH        int
	strideW        int
	outH, outW     int
	key            string // the parameters, for op descriptions
	inShape, shape tensor.Shape
}

// NewMaxPool reads the parameters of op, the op of a gorgonia.MaxPool2D
// node. It fails for any other op, and for input planes too large for their
// indices to be exact in float32.
func NewMaxPool(op gorgonia.Op) (MaxPool, error) {
	if reach.TypeString(op) != "*gorgonia.maxPoolOp" {
		return MaxPool{}, errors.Errorf("stageops: %v (%T) is not gorgonia's MaxPool2D", op, op)
	}
	fields := map[string]int{}
	for _, f := range []string{"unpaddedB", "unpaddedC", "unpaddedH", "unpaddedW", "h", "w", "padNorth", "padWest", "padSouth", "padEast", "strideH", "strideW"} {
		v, err := reach.Int(op, f)
		if err != nil {
			return MaxPool{}, errors.Wrap(err, "stageops: reading gorgonia's maxPoolOp")
		}
		fields[f] = v
	}
	explicit, err := reach.Bool(op, "explicitPadding")
	if err != nil {
		return MaxPool{}, errors.Wrap(err, "stageops: reading gorgonia's maxPoolOp")
	}
	get := func(name string) int { return fields[name] }
	mp := MaxPool{
		b: get("unpaddedB"), c: get("unpaddedC"), h: get("unpaddedH"), w: get("unpaddedW"),
		kh: get("h"), kw: get("w"), strideH: get("strideH"), strideW: get("strideW"),
		padH: get("padNorth"), padW: get("padWest"),
	}
	if explicit { // gorgonia's loop reads these then
		mp.padH, mp.padW = get("padSouth"), get("padEast")
	}
	mp.outH = (mp.h+get("padSouth")+get("padNorth")-(mp.kh-1)-1)/mp.strideH + 1
	mp.outW = (mp.w+get("padEast")+get("padWest")-(mp.kw-1)-1)/mp.strideW + 1
	if mp.h*mp.w > 1<<24 {
		return MaxPool{}, errors.Errorf("stageops: MaxPool of %d×%d planes: indices would not be exact in float32", mp.h, mp.w)
	}
	mp.inShape = tensor.Shape{mp.b, mp.c, mp.h, mp.w}
	mp.shape = tensor.Shape{mp.b, mp.c, mp.outH, mp.outW}
	mp.key = fmt.Sprintf("%v-k%dx%d-p%dx%d-s%dx%d", mp.inShape, mp.kh, mp.kw, mp.padH, mp.padW, mp.strideH, mp.strideW)
	return mp, nil
}

// Apply builds the pooling of x: the argmax node and the pooled values,
// whose gradient scatters the output gradient to the argmax positions.
// Values and gradients are bit-identical to gorgonia's (a window with no
// value above −MaxFloat gives −MaxFloat and no gradient, where gorgonia's
// backward would index −1 and panic).
func (mp MaxPool) Apply(x *gorgonia.Node) (y, argmax *gorgonia.Node, err error) {
	if !x.Shape().Eq(mp.inShape) {
		return nil, nil, errors.Errorf("stageops: MaxPool built for %v, applied to %v", mp.inShape, x.Shape())
	}
	if argmax, err = gorgonia.ApplyOp(&poolArgmax{named{"maxpool-argmax" + mp.key}, mp}, x); err != nil {
		return nil, nil, err
	}
	if y, err = gorgonia.ApplyOp(&poolGather{named{"maxpool-gather" + mp.key}, mp}, x, argmax); err != nil {
		return nil, nil, err
	}
	return y, argmax, nil
}

// poolArgmax finds each window's maximum as gorgonia's maxPoolOp does: the
// first element strictly above the running maximum, which starts at
// −MaxFloat (index −1 if none is).
type poolArgmax struct {
	named
	MaxPool
}

func (op *poolArgmax) Arity() int    { return 1 }
func (op *poolArgmax) Type() hm.Type { return fnType(4, 4) }
func (op *poolArgmax) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.shape.Clone(), nil
}
func (op *poolArgmax) DiffWRT(int) []bool { return []bool{false} }
func (op *poolArgmax) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, op.errorf("an argmax has no gradient")
}
func (op *poolArgmax) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *poolArgmax) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		if len(vals) != 1 {
			return nil, op.errorf("takes 1 input, got %d", len(vals))
		}
		x, err := dense(op.desc, vals[0], op.inShape)
		if err != nil {
			return nil, err
		}
		idx := output(prealloc, x, op.shape, false)
		switch x.Dtype() {
		case tensor.Float32:
			argmaxKernel(x.Float32s(), idx.Float32s(), op.MaxPool, -math.MaxFloat32)
		default:
			argmaxKernel(x.Float64s(), idx.Float64s(), op.MaxPool, -math.MaxFloat64)
		}
		return idx, nil
	})
}

func argmaxKernel[T float](x, idx []T, mp MaxPool, lowest T) {
	in, out := mp.h*mp.w, mp.outH*mp.outW
	// 2×2 windows at stride 2 without padding (every zoo max-pool) each
	// lie on the image: argmax2x2 compares their four values unrolled.
	two := mp.kh == 2 && mp.kw == 2 && mp.strideH == 2 && mp.strideW == 2 &&
		mp.padH == 0 && mp.padW == 0 && 2*mp.outH <= mp.h && 2*mp.outW <= mp.w
	parallel(mp.b*mp.c, in, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane, res := x[p*in:(p+1)*in], idx[p*out:(p+1)*out]
			if two {
				argmax2x2(plane, res, mp, lowest)
				continue
			}
			for ph := 0; ph < mp.outH; ph++ {
				h0 := ph*mp.strideH - mp.padH
				h1 := min(h0+mp.kh, mp.h)
				h0 = max(h0, 0)
				for pw := 0; pw < mp.outW; pw++ {
					w0 := pw*mp.strideW - mp.padW
					w1 := min(w0+mp.kw, mp.w)
					w0 = max(w0, 0)
					// The comparison's outcome is data, mispredicted
					// about half the time as a branch: it selects the
					// index and the value by arithmetic instead.
					best, at := lowest, -1
					for hi := h0; hi < h1; hi++ {
						row := plane[hi*mp.w : (hi+1)*mp.w]
						for wi := w0; wi < w1; wi++ {
							v, k := row[wi], 0
							if v > best {
								k = 1
							}
							at += k * (hi*mp.w + wi - at)
							best = [2]T{best, v}[k]
						}
					}
					res[ph*mp.outW+pw] = T(at)
				}
			}
		}
	})
}

// argmax2x2 is argmaxKernel's loop for one plane of 2×2 windows at stride
// 2 on the image: the same comparisons in the same order (row by row,
// strictly above the running maximum, selected by arithmetic); in float32,
// a row of windows eight at a time where the CPU can (argmax2x2Wide).
func argmax2x2[T float](plane, res []T, mp MaxPool, lowest T) {
	w := mp.w
	for ph := range mp.outH {
		top := 2 * ph * w
		r0, r1 := plane[top:top+w], plane[top+w:top+2*w]
		out := res[ph*mp.outW : (ph+1)*mp.outW]
		if o32, ok := any(out).([]float32); ok && argmax2x2Wide(o32, any(r0).([]float32), any(r1).([]float32), top, w, float32(lowest)) {
			continue
		}
		for pw := range out {
			c := 2 * pw
			a, b := (*[2]T)(r0[c:]), (*[2]T)(r1[c:])
			best, at := higher(lowest, -1, a[0], top+c)
			best, at = higher(best, at, a[1], top+c+1)
			best, at = higher(best, at, b[0], top+w+c)
			_, at = higher(best, at, b[1], top+w+c+1)
			out[pw] = T(at)
		}
	}
}

// higher is one step of argmaxKernel's comparison: v at index i replaces
// the running maximum best at index at if v > best, without a branch.
func higher[T float](best T, at int, v T, i int) (T, int) {
	k := 0
	if v > best {
		k = 1
	}
	return [2]T{best, v}[k], at + k*(i-at)
}

// poolGather reads the input at the argmax: the pooled values. Inputs: x,
// argmax.
type poolGather struct {
	named
	MaxPool
}

func (op *poolGather) Arity() int    { return 2 }
func (op *poolGather) Type() hm.Type { return fnType(4, 4, 4) }
func (op *poolGather) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.shape.Clone(), nil
}
func (op *poolGather) DiffWRT(int) []bool { return []bool{true, false} }
func (op *poolGather) SymDiff(inputs gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	dx, err := gorgonia.ApplyOp(&poolScatter{named{"maxpool-scatter" + op.key}, op.MaxPool}, grad, inputs[1])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx, nil}, nil
}
func (op *poolGather) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *poolGather) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		x, idx, err := op.two(vals, op.inShape)
		if err != nil {
			return nil, err
		}
		y := output(prealloc, x, op.shape, false)
		switch x.Dtype() {
		case tensor.Float32:
			gatherKernel(x.Float32s(), idx.Float32s(), y.Float32s(), op.MaxPool, -math.MaxFloat32)
		default:
			gatherKernel(x.Float64s(), idx.Float64s(), y.Float64s(), op.MaxPool, -math.MaxFloat64)
		}
		return y, nil
	})
}

// two checks a pair of inputs: the first of shape first, then the argmax.
func (mp MaxPool) two(vals []gorgonia.Value, first tensor.Shape) (a, idx *tensor.Dense, err error) {
	if len(vals) != 2 {
		return nil, nil, errors.Errorf("stageops: maxpool %s takes 2 inputs, got %d", mp.key, len(vals))
	}
	if a, err = dense("maxpool "+mp.key, vals[0], first); err != nil {
		return nil, nil, err
	}
	if idx, err = dense("maxpool argmax "+mp.key, vals[1], mp.shape); err != nil {
		return nil, nil, err
	}
	return a, idx, sameDtype(mp.key, a, idx)
}

func gatherKernel[T float](x, idx, y []T, mp MaxPool, lowest T) {
	in, out := mp.h*mp.w, mp.outH*mp.outW
	for p := 0; p < mp.b*mp.c; p++ {
		plane := x[p*in : (p+1)*in]
		for i, at := range idx[p*out : (p+1)*out] {
			if at < 0 {
				y[p*out+i] = lowest
				continue
			}
			y[p*out+i] = plane[int(at)]
		}
	}
}

// poolScatter is gorgonia's maxPoolDiffOp: the input gradient is zero but
// at each window's argmax, where the window's output gradient is added (in
// window order, for overlapping windows). Inputs: dy, argmax.
type poolScatter struct {
	named
	MaxPool
}

func (op *poolScatter) Arity() int    { return 2 }
func (op *poolScatter) Type() hm.Type { return fnType(4, 4, 4) }
func (op *poolScatter) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.inShape.Clone(), nil
}
func (op *poolScatter) DiffWRT(int) []bool { return []bool{false, false} }
func (op *poolScatter) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, op.errorf("no second derivative")
}
func (op *poolScatter) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *poolScatter) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		dy, idx, err := op.two(vals, op.shape)
		if err != nil {
			return nil, err
		}
		dx := output(prealloc, dy, op.inShape, true) // scattered into zeros
		switch dy.Dtype() {
		case tensor.Float32:
			scatterKernel(dy.Float32s(), idx.Float32s(), dx.Float32s(), op.MaxPool)
		default:
			scatterKernel(dy.Float64s(), idx.Float64s(), dx.Float64s(), op.MaxPool)
		}
		return dx, nil
	})
}

func scatterKernel[T float](dy, idx, dx []T, mp MaxPool) {
	in, out := mp.h*mp.w, mp.outH*mp.outW
	for p := 0; p < mp.b*mp.c; p++ {
		plane := dx[p*in : (p+1)*in]
		g := dy[p*out : (p+1)*out]
		for i, at := range idx[p*out : (p+1)*out] {
			if at >= 0 {
				plane[int(at)] += g[i]
			}
		}
	}
}
