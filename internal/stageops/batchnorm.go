package stageops

import (
	"fmt"
	"github.com/pipemare/pipemare/internal/reach"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BatchNorm describes one of the user's BatchNorms as a stage computes it:
// the op (whose running statistics, momentum, epsilon and training mode it
// reads), and what follows it that the stage fuses into the same pass.
type BatchNorm struct {
	Op *gorgonia.BatchNormOp
	// Scale and Bias, when set, are the per-channel learnables that
	// gorgonia.BatchNorm multiplies and adds by broadcasting (any shape of C
	// elements). ScaleAxes and BiasAxes are the axes of x the broadcast
	// repeated them along, in the order the repeats were applied: the
	// gradient sums along them in reverse, as gorgonia does.
	Scale, Bias         *gorgonia.Node
	ScaleAxes, BiasAxes []int
	// ReLU applies gorgonia.Rectify to the result.
	ReLU bool
}

// Apply builds the stage's BatchNorm on x: a statistics node (the batch
// mean and inverse standard deviation per channel in training mode, the
// running ones in inference mode; it updates the running statistics of
// bn.Op as gorgonia's op does; with Scale and Bias, rows 2 and 3 are a copy
// of their values) and the normalised output, whose gradient reads x, the
// statistics and the output gradient — not Scale and Bias. It replaces
// gorgonia's BatchNormOp node — and, with Scale and Bias, the broadcast ⊙
// and + that follow it; with ReLU, the Rectify after them — with results
// bit-identical to gorgonia's.
//
// The statistics are everything the forward applied, so a backward that
// reads them where the forward left them (a stage keeping activations) gets
// gorgonia's gradient even when the weights changed in between: gorgonia's
// backward multiplies by the broadcast scale its forward computed, and
// passes the gradient through the Rectify mask its forward computed, where
// the current Scale and Bias could give another mask.
func (bn BatchNorm) Apply(x *gorgonia.Node) (y, stats *gorgonia.Node, err error) {
	p, err := newBNParams(bn.Op, x.Shape())
	if err != nil {
		return nil, nil, err
	}
	if (bn.Scale == nil) != (bn.Bias == nil) {
		return nil, nil, errors.New("stageops: BatchNorm: scale and bias go together")
	}
	if bn.Scale != nil {
		for _, l := range []*gorgonia.Node{bn.Scale, bn.Bias} {
			if l.Shape().TotalSize() != p.c {
				return nil, nil, errors.Errorf("stageops: BatchNorm: %q has %d elements, want %d channels", l.Name(), l.Shape().TotalSize(), p.c)
			}
		}
		for _, axes := range [][]int{bn.ScaleAxes, bn.BiasAxes} {
			if err := checkAxes(axes, x.Shape()); err != nil {
				return nil, nil, err
			}
		}
	}
	p.affine = bn.Scale != nil
	affine := gorgonia.Nodes{}
	if p.affine {
		affine = gorgonia.Nodes{bn.Scale, bn.Bias}
	}
	st := &bnStats{named: named{fmt.Sprintf("bnstats-%p-%v", bn.Op, p.affine)}, bnParams: p, fused: bn}
	if stats, err = gorgonia.ApplyOp(st, append(gorgonia.Nodes{x}, affine...)...); err != nil {
		return nil, nil, err
	}
	ap := &bnApply{named: named{fmt.Sprintf("bnapply-%p-%v-%v", bn.Op, p.affine, bn.ReLU)}, bnParams: p, fused: bn}
	if y, err = gorgonia.ApplyOp(ap, append(gorgonia.Nodes{x, stats}, affine...)...); err != nil {
		return nil, nil, err
	}
	return y, stats, nil
}

// checkAxes accepts increasing axes of shape other than the channel axis 1.
func checkAxes(axes []int, shape tensor.Shape) error {
	for i, a := range axes {
		if a < 0 || a >= len(shape) || a == 1 || (i > 0 && a <= axes[i-1]) {
			return errors.Errorf("stageops: BatchNorm: broadcast axes %v of %v: want increasing axes other than the channels'", axes, shape)
		}
	}
	return nil
}

// bnParams is what the BatchNorm kernels need to know of x and the op.
type bnParams struct {
	op            *gorgonia.BatchNormOp
	momentum, eps float64
	shape         tensor.Shape // x's
	b, c, s       int          // batch, channels, spatial size (1 for a matrix)
	affine        bool         // with scale and bias: the statistics copy them
}

// statsShape is the statistics' shape: (2, C), or (4, C) with scale and
// bias.
func (p bnParams) statsShape() tensor.Shape {
	if p.affine {
		return tensor.Shape{4, p.c}
	}
	return tensor.Shape{2, p.c}
}

func newBNParams(op *gorgonia.BatchNormOp, shape tensor.Shape) (bnParams, error) {
	if op == nil {
		return bnParams{}, errors.New("stageops: BatchNorm: nil op")
	}
	if d := shape.Dims(); d != 2 && d != 4 {
		return bnParams{}, errors.Errorf("stageops: BatchNorm of shape %v: want (B, C) or (B, C, H, W)", shape)
	}
	m, err := reach.Float(op, "momentum")
	if err != nil {
		return bnParams{}, errors.Wrap(err, "stageops: BatchNorm: reading gorgonia's BatchNormOp")
	}
	e, err := reach.Float(op, "epsilon")
	if err != nil {
		return bnParams{}, errors.Wrap(err, "stageops: BatchNorm: reading gorgonia's BatchNormOp")
	}
	if _, err := reach.Bool(op, "training"); err != nil {
		return bnParams{}, errors.Wrap(err, "stageops: BatchNorm: reading gorgonia's BatchNormOp")
	}
	mean, _ := op.Stats()
	if mean.Shape().TotalSize() != shape[1] {
		return bnParams{}, errors.Errorf("stageops: BatchNorm: op has %d channels, x is %v", mean.Shape().TotalSize(), shape)
	}
	p := bnParams{op: op, momentum: m, eps: e, shape: shape.Clone(), b: shape[0], c: shape[1]}
	p.s = shape.TotalSize() / (p.b * p.c)
	return p, nil
}

// training reads the op's mode: gorgonia's SetTraining on the user's op (as
// evaluation does) switches it.
func (p bnParams) training() bool {
	training, _ := reach.Bool(p.op, "training") // newBNParams read it
	return training
}

// bnStats computes what gorgonia's BatchNormOp keeps in saveMean and
// saveVariance: stats (2, C), row 0 the mean, row 1 the inverse standard
// deviation its normalisation multiplies by; with scale and bias (inputs x,
// scale, bias), stats (4, C), rows 2 and 3 their values — every constant
// the forward applies, which the gradient reads from here. In training mode
// it updates the op's running statistics exactly as gorgonia does, with one
// accumulator per channel in a register (gorgonia's per-channel goroutines
// accumulate in adjacent memory and share cache lines).
type bnStats struct {
	named
	bnParams
	fused BatchNorm
}

func (op *bnStats) Arity() int {
	if op.affine {
		return 3
	}
	return 1
}
func (op *bnStats) Type() hm.Type {
	if op.affine {
		return fnType(2, op.shape.Dims(), op.fused.Scale.Dims(), op.fused.Bias.Dims())
	}
	return fnType(2, op.shape.Dims())
}
func (op *bnStats) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.statsShape(), nil
}
func (op *bnStats) DiffWRT(n int) []bool { return make([]bool, n) }

// HasEffects says that the op runs even where nothing reads its result
// (internal/tape.Effectful): in training mode it updates the running
// statistics.
func (op *bnStats) HasEffects() {}
func (op *bnStats) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, op.errorf("statistics are not differentiated (the normalisation's gradient includes them)")
}

// SetTraining is how a tape machine announces its mode when it is compiled.
// Like gorgonia's BatchNormOp, true resets the running statistics (which
// training then starts from) — except while the model is in inference mode
// (the user's op switched off), where a program compiled during an
// evaluation stays in inference mode and leaves the statistics alone.
func (op *bnStats) SetTraining(training bool) error {
	if training && !op.training() {
		return nil
	}
	return op.op.SetTraining(training)
}

func (op *bnStats) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *bnStats) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		want := []tensor.Shape{op.shape}
		if op.affine {
			want = append(want, tensor.Shape{op.c}, tensor.Shape{op.c})
		}
		ts, err := op.denseInputs(vals, want...)
		if err != nil {
			return nil, err
		}
		x := ts[0]
		rm, rv := op.op.Stats()
		out := output(prealloc, x, op.statsShape(), false)
		training := op.training()
		switch x.Dtype() {
		case tensor.Float32:
			bnStatsKernel(floats[float32](ts), out.Float32s(), rm.Data().([]float32), rv.Data().([]float32), op.bnParams, training)
		default:
			bnStatsKernel(floats[float64](ts), out.Float64s(), rm.Data().([]float64), rv.Data().([]float64), op.bnParams, training)
		}
		return out, nil
	})
}

func sqrt[T float](x T) T { return T(math.Sqrt(float64(x))) }

// bnStatsKernel is gorgonia's updateStats and calculateAlphaAndBeta
// (op_nn.go), per channel in the same order, on in = x[, scale, bias]; it
// copies scale and bias into rows 2 and 3.
func bnStatsKernel[T float](in [][]T, out, rm, rv []T, p bnParams, training bool) {
	x := in[0]
	mean, inv := out[:p.c], out[p.c:2*p.c]
	if p.affine {
		copy(out[2*p.c:3*p.c], in[1])
		copy(out[3*p.c:], in[2])
	}
	eps := T(p.eps)
	if !training {
		for c := range mean {
			mean[c] = rm[c]
			inv[c] = 1 / sqrt(rv[c]+eps)
		}
		return
	}
	n := p.b * p.s
	mom := T(p.momentum)
	parallel(p.c, n, func(lo, hi int) {
		for c := lo; c < hi; c += 4 {
			k := min(4, hi-c)
			var m [4]T
			sum := channelSums(x, p, c, k, nil)
			for j := range k {
				m[j] = sum[j] / T(n)
			}
			sq := channelSums(x, p, c, k, &m)
			for j := range k {
				rm[c+j] = mom*m[j] + (1-mom)*rm[c+j]
				unbiased := sq[j] / T(n-1)
				rv[c+j] = mom*unbiased + (1-mom)*rv[c+j]
				mean[c+j] = m[j]
				inv[c+j] = 1 / sqrt(sq[j]/T(n)+eps)
			}
		}
	})
}

// channelSums sums, for each of the k ≤ 4 channels from c, x (m nil) or
// its squared distance to the channel's m, from 0 in index order over the
// images and pixels. Four channels are summed side by side, each in its
// own order, so that one addition need not wait for the one before.
func channelSums[T float](x []T, p bnParams, c, k int, m *[4]T) [4]T {
	var acc, mm [4]T
	if m != nil {
		mm = *m
	}
	if k < 4 {
		for j := range k {
			for b := 0; b < p.b; b++ {
				for _, v := range x[(b*p.c+c+j)*p.s : (b*p.c+c+j+1)*p.s] {
					if m == nil {
						acc[j] += v
					} else {
						acc[j] += (v - mm[j]) * (v - mm[j])
					}
				}
			}
		}
		return acc
	}
	// Scalars, not the array: the compiler keeps them in registers.
	var a0, a1, a2, a3 T
	m0, m1, m2, m3 := mm[0], mm[1], mm[2], mm[3]
	for b := 0; b < p.b; b++ {
		at := (b*p.c + c) * p.s
		x0 := x[at : at+p.s]
		x1, x2, x3 := x[at+p.s:][:len(x0)], x[at+2*p.s:][:len(x0)], x[at+3*p.s:][:len(x0)]
		if m == nil {
			for i, v := range x0 {
				a0 += v
				a1 += x1[i]
				a2 += x2[i]
				a3 += x3[i]
			}
			continue
		}
		for i, v := range x0 {
			a0 += (v - m0) * (v - m0)
			a1 += (x1[i] - m1) * (x1[i] - m1)
			a2 += (x2[i] - m2) * (x2[i] - m2)
			a3 += (x3[i] - m3) * (x3[i] - m3)
		}
	}
	return [4]T{a0, a1, a2, a3}
}

// bnApply normalises x with the statistics: x·α + β with α the inverse
// standard deviation and β = −mean·α, as gorgonia's BatchNormOp does; then,
// fused, scale·y + bias and Rectify (y·(y ≥ 0)), each rounded as gorgonia's
// separate ops round. Inputs: x, stats[, scale, bias].
type bnApply struct {
	named
	bnParams
	fused BatchNorm
}

func (op *bnApply) Arity() int {
	if op.fused.Scale != nil {
		return 4
	}
	return 2
}
func (op *bnApply) Type() hm.Type {
	d := op.shape.Dims()
	if op.fused.Scale != nil {
		return fnType(d, d, 2, op.fused.Scale.Dims(), op.fused.Bias.Dims())
	}
	return fnType(d, d, 2)
}
func (op *bnApply) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.shape.Clone(), nil
}
func (op *bnApply) DiffWRT(n int) []bool {
	if n == 4 {
		return []bool{true, false, true, true}
	}
	return []bool{true, false}
}

// SymDiff returns the gradients of x (the whole BatchNorm gradient: the
// statistics depend on x) and of scale and bias. They read x, the
// statistics and grad: the scale and bias the forward applied are in the
// statistics.
func (op *bnApply) SymDiff(inputs gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	in := gorgonia.Nodes{inputs[0], inputs[1], grad}
	g := &bnGrad{named: named{"bngrad-x-" + op.desc}, bnApply: op, what: gradX}
	dx, err := gorgonia.ApplyOp(g, in...)
	if err != nil {
		return nil, err
	}
	out := gorgonia.Nodes{dx, nil}
	if op.fused.Scale == nil {
		return out, nil
	}
	for _, w := range []gradOf{gradScale, gradBias} {
		g := &bnGrad{named: named{fmt.Sprintf("bngrad-%d-%s", w, op.desc)}, bnApply: op, what: w}
		d, err := gorgonia.ApplyOp(g, in...)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (op *bnApply) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *bnApply) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		ts, err := op.inputs(vals, false)
		if err != nil {
			return nil, err
		}
		y := output(prealloc, ts[0], op.shape, false)
		switch ts[0].Dtype() {
		case tensor.Float32:
			bnApplyKernel(y.Float32s(), floats[float32](ts), op)
		default:
			bnApplyKernel(y.Float64s(), floats[float64](ts), op)
		}
		return y, nil
	})
}

// inputs checks x, stats and then dy (withGrad) or [scale, bias].
func (op *bnApply) inputs(vals []gorgonia.Value, withGrad bool) ([]*tensor.Dense, error) {
	want := []tensor.Shape{op.shape, op.statsShape()}
	switch {
	case withGrad:
		want = append(want, op.shape)
	case op.affine:
		want = append(want, tensor.Shape{op.c}, tensor.Shape{op.c})
	}
	return op.named.denseInputs(vals, want...)
}

func floats[T float](ts []*tensor.Dense) [][]T {
	out := make([][]T, len(ts))
	for i, t := range ts {
		out[i] = t.Data().([]T)
	}
	return out
}

// gradOf says which gradient a bnGrad computes.
type gradOf int

const (
	gradX gradOf = iota
	gradScale
	gradBias
)

// bnGrad is the gradient of a bnApply with respect to x, scale or bias.
// Inputs: x, stats, dy; the scale and bias are those the forward applied,
// rows 2 and 3 of stats. The gradient of x is gorgonia's batchnormDiffOp
// applied to the gradient of the normalised values (dy through the Rectify
// mask and times scale, each rounded as gorgonia's ops round); those of
// scale and bias are the sums, along the broadcast axes in the order
// gorgonia's Repeat gradients sum, of dy·x̂ and dy (through the mask). The
// mask is recomputed from x and stats with the forward's own arithmetic:
// the forward's mask, bit for bit.
type bnGrad struct {
	named
	*bnApply
	what gradOf
	// terms is the scale's or bias's gradient's terms, one plane per
	// channel (bnChannel.terms), kept between runs (scratch).
	terms any
}

func (op *bnGrad) Arity() int { return 3 }
func (op *bnGrad) Type() hm.Type {
	d := op.shape.Dims()
	in := []int{d, 2, d}
	out := d
	switch op.what {
	case gradScale:
		out = op.fused.Scale.Dims()
	case gradBias:
		out = op.fused.Bias.Dims()
	}
	return fnType(out, in...)
}
func (op *bnGrad) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	switch op.what {
	case gradScale:
		return op.fused.Scale.Shape().Clone(), nil
	case gradBias:
		return op.fused.Bias.Shape().Clone(), nil
	}
	return op.shape.Clone(), nil
}
func (op *bnGrad) DiffWRT(n int) []bool { return make([]bool, n) }
func (op *bnGrad) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, op.errorf("no second derivative")
}

func (op *bnGrad) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *bnGrad) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		ts, err := op.inputs(vals, true)
		if err != nil {
			return nil, err
		}
		shape, _ := op.InferShape()
		out := output(prealloc, ts[0], shape, false)
		training := op.training()
		switch ts[0].Dtype() {
		case tensor.Float32:
			bnGradKernel(out.Float32s(), floats[float32](ts), op, training)
		default:
			bnGradKernel(out.Float64s(), floats[float64](ts), op, training)
		}
		return out, nil
	})
}
