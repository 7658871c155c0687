package solvers

import (
	"math"

	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file is what SGD, Momentum and Adam share: reading a Step's model
// as flat slices, and gorgonia's preparation of a gradient (regularisation,
// batch scaling, clipping).
//
// Bit-identity with gorgonia rests on doing the same float operations in
// the same order and precision. gorgonia runs a tensor learnable through
// whole-tensor operations, each rounding its result into memory, and a
// scalar learnable (*gorgonia.F32, *gorgonia.F64) through different
// scalar code; both paths are reproduced here. Every product is rounded
// on its own (the explicit conversion T(x·y)), which the Go compiler never
// fuses into a multiply-add: the solvers give the same bits on every
// platform and build. gorgonia's do on builds that do not fuse (amd64 at
// the default GOAMD64=v1 or v2, where the tests compare them); with
// GOAMD64=v3 or on arm64 the compiler fuses some of gorgonia's own
// multiply-adds (tensor's incr[i] += a[i]·b in Adam, its scalar code) and
// gorgonia's results move by an ulp.

type float interface{ ~float32 | ~float64 }

// entry is one learnable of a Step's model as flat slices: the tensors'
// own elements, or for a gorgonia scalar a one-element copy that done
// writes back.
type entry struct {
	w, g   interface{} // []float32 or []float64
	scalar bool
	done   func() // stores a scalar's weight and zeroes the gradient
}

// resolve reads every learnable of model, checking all of them before a
// solver changes anything.
func resolve(kind string, model []gorgonia.ValueGrad) ([]entry, error) {
	out := make([]entry, len(model))
	for i, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			return nil, errors.Wrapf(err, "solvers: %s: no gradient for %s", kind, slots.Describe(i, vg))
		}
		if out[i], err = newEntry(vg.Value(), g); err != nil {
			return nil, errors.Wrapf(err, "solvers: %s: %s", kind, slots.Describe(i, vg))
		}
	}
	return out, nil
}

func newEntry(w, g gorgonia.Value) (entry, error) {
	switch wv := w.(type) {
	case *tensor.Dense:
		gv, ok := g.(*tensor.Dense)
		switch {
		case !ok:
			return entry{}, errors.Errorf("the weights are a tensor, the gradient %T", g)
		case wv.RequiresIterator() || gv.RequiresIterator():
			return entry{}, errors.New("the weights or the gradient are a view; give the solver dense tensors")
		case gv.Dtype() != wv.Dtype() || gv.Shape().TotalSize() != wv.Shape().TotalSize():
			return entry{}, errors.Errorf("the weights are %v %v, the gradient %v %v", wv.Shape(), wv.Dtype(), gv.Shape(), gv.Dtype())
		}
		e := entry{done: gv.Zero}
		switch wv.Dtype() {
		case tensor.Float32:
			e.w, e.g = wv.Float32s(), gv.Float32s()
		case tensor.Float64:
			e.w, e.g = wv.Float64s(), gv.Float64s()
		default:
			return entry{}, errors.Errorf("dtype %v: the solvers take float32 and float64", wv.Dtype())
		}
		return e, nil
	case *gorgonia.F32:
		gv, ok := g.(*gorgonia.F32)
		if !ok {
			return entry{}, errors.Errorf("the weight is a float32 scalar, the gradient %T", g)
		}
		ws, gs := []float32{float32(*wv)}, []float32{float32(*gv)}
		return entry{w: ws, g: gs, scalar: true, done: func() { *wv, *gv = gorgonia.F32(ws[0]), 0 }}, nil
	case *gorgonia.F64:
		gv, ok := g.(*gorgonia.F64)
		if !ok {
			return entry{}, errors.Errorf("the weight is a float64 scalar, the gradient %T", g)
		}
		ws, gs := []float64{float64(*wv)}, []float64{float64(*gv)}
		return entry{w: ws, g: gs, scalar: true, done: func() { *wv, *gv = gorgonia.F64(ws[0]), 0 }}, nil
	}
	return entry{}, errors.Errorf("the weights are %T; the solvers take dense tensors and float scalars", w)
}

// params are a hyper's numbers in the learnable's precision, converted as
// gorgonia converts them.
type params[T float] struct {
	l1, l2, clip, negClip, onePerBatch, negEta T
	useL1, useL2, useClip, clipTensors, batch  bool
}

func newParams[T float](h *hyper) params[T] {
	return params[T]{
		l1: T(h.l1), l2: T(h.l2), clip: T(h.clip), negClip: -T(h.clip),
		onePerBatch: T(1) / T(h.batch), negEta: -T(h.eta),
		useL1: h.useL1, useL2: h.useL2, useClip: h.useClip,
		clipTensors: h.useClip && h.clip > 0, batch: h.batch > 1,
	}
}

// prep is gorgonia's preparation of a tensor learnable's gradient g, in
// place, one whole-tensor pass per operation as gorgonia's: + l1·sign(reg),
// + reg·l2, · 1/batch, clamped; reg is the weight (SGD, Adam) or the
// velocity (Momentum).
func (p *params[T]) prep(g, reg []T) {
	if p.useL1 {
		for i := range g {
			g[i] = g[i] + T(p.l1*sign(reg[i]))
		}
	}
	if p.useL2 {
		for i := range g {
			g[i] = g[i] + T(reg[i]*p.l2)
		}
	}
	if p.batch {
		for i := range g {
			g[i] = T(g[i] * p.onePerBatch)
		}
	}
	if p.clipTensors {
		lo, hi := p.negClip, p.clip
		for i, x := range g {
			if x < lo {
				g[i] = lo
			} else if x > hi {
				g[i] = hi
			}
		}
	}
}

// prepScalar is gorgonia's preparation of a scalar learnable's gradient,
// which differs from prep: sign(0) counts as +1, the regulariser is always
// the weight, and the clip applies whatever its value.
func (p *params[T]) prepScalar(g, w T) T {
	if p.useL1 {
		l1reg := p.l1
		if w < 0 {
			l1reg = -l1reg
		}
		g += l1reg
	}
	if p.useL2 {
		g += T(p.l2 * w)
	}
	if p.batch {
		g = T(g * p.onePerBatch)
	}
	if p.useClip {
		if g > p.clip {
			g = p.clip
		} else if g < -p.clip {
			g = -p.clip
		}
	}
	return g
}

// sign is tensor.Sign: −1, +1, or x itself for ±0 and NaN.
func sign[T float](x T) T {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return x
}

// sqrt is correctly rounded in T (float32 through float64 is exact for a
// square root), as tensor's and gorgonia's are.
func sqrt[T float](x T) T { return T(math.Sqrt(float64(x))) }
