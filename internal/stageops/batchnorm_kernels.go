package stageops

import "gorgonia.org/tensor"

// The BatchNorm kernels compute, channel by channel, what gorgonia's ops
// compute element by element: its BatchNormOp (x̂ = x·α + β), the broadcast
// ⊙ scale and + bias gorgonia.BatchNorm adds, Rectify (v·(v ≥ 0)), and their
// gradients — each product and sum rounded where gorgonia's separate ops
// round (the explicit T(…) conversions keep a compiler that fuses
// multiply-adds from fusing across those ops), the reductions in gorgonia's
// order.

// bnChannel is one channel's constants.
type bnChannel[T float] struct {
	alpha, beta, scale, bias T
	affine, relu             bool
}

// channel reads channel c's constants from the statistics (bnStats):
// those the forward applied.
func channel[T float](stats []T, op *bnApply, c int) bnChannel[T] {
	alpha := stats[op.c+c]
	ch := bnChannel[T]{alpha: alpha, beta: -stats[c] * alpha, affine: op.affine, relu: op.fused.ReLU}
	if ch.affine {
		ch.scale, ch.bias = stats[2*op.c+c], stats[3*op.c+c]
	}
	return ch
}

// forward writes the outputs of one image's plane x of the channel into y;
// with Rectify, in float32, eight at a time where the CPU can
// (bnReLUWide).
func (ch bnChannel[T]) forward(y, x []T) {
	a, b, s, c := ch.alpha, ch.beta, ch.scale, ch.bias
	switch {
	case !ch.affine:
		for i, v := range x {
			y[i] = v*a + b
		}
	case !ch.relu:
		for i, v := range x {
			y[i] = T(s*(v*a+b)) + c
		}
	default:
		if y32, ok := any(y).([]float32); ok {
			done := bnReLUWide(y32, any(x).([]float32), float32(a), float32(b), float32(s), float32(c))
			y, x = y[done:], x[done:]
		}
		for i, v := range x {
			t := T(s*(v*a+b)) + c
			y[i] = t * mask(t) // gorgonia's t·mask(t): t·0 is −0, or NaN
		}
	}
}

// upstream writes into g, for one plane, the gradient that reaches the
// normalised values: dy through the Rectify mask (recomputed from x as
// forward computed it) and times scale; with Rectify, in float32, eight at
// a time where the CPU can (bnReLUGradWide).
func (ch bnChannel[T]) upstream(g, x, dy []T) {
	a, b, s, c := ch.alpha, ch.beta, ch.scale, ch.bias
	switch {
	case !ch.affine:
		copy(g, dy)
	case !ch.relu:
		for i, d := range dy {
			g[i] = d * s
		}
	default:
		if g32, ok := any(g).([]float32); ok {
			done := bnReLUGradWide(g32, any(x).([]float32), any(dy).([]float32), float32(a), float32(b), float32(s), float32(c))
			g, x, dy = g[done:], x[done:], dy[done:]
		}
		for i, v := range x {
			g[i] = T(dy[i]*mask(T(s*(v*a+b))+c)) * s
		}
	}
}

// rowSum is, for one row, the sum from 0 of the gradient that reaches the
// bias (dy through the Rectify mask) or, timesXhat, the scale (that times
// x̂): elem's terms. The loops keep the channel's constants in locals, as
// forward and upstream do: a call of elem per element, once inlined,
// copied the struct through the stack each time, and the misaligned copy's
// reload stalled on store forwarding where the goroutine's stack happened
// to sit (docs/speed.md).
func (ch bnChannel[T]) rowSum(x, dy []T, timesXhat bool) T {
	a, b, s, c := ch.alpha, ch.beta, ch.scale, ch.bias
	var acc T
	switch {
	case !ch.relu && !timesXhat:
		for _, d := range dy {
			acc += d
		}
	case !ch.relu:
		for i, v := range x {
			acc += T(dy[i] * (v*a + b))
		}
	case !timesXhat:
		for i, v := range x {
			acc += dy[i] * mask(T(s*(v*a+b))+c)
		}
	default:
		for i, v := range x {
			xhat := v*a + b
			d := dy[i] * mask(T(s*xhat)+c)
			acc += T(d * xhat)
		}
	}
	return acc
}

// terms writes into t, as long as x, elem's values for one plane, where a
// vector kernel computes them (Rectify, float32, a CPU with AVX, 8 values
// or more), and returns t; else nil: rowSum computes them as it adds them
// up.
func (ch bnChannel[T]) terms(t, x, dy []T, timesXhat bool) []T {
	x32, ok := any(x).([]float32)
	if !ok || !ch.relu || !wideBN || len(x) < 8 {
		return nil
	}
	t = t[:len(x)]
	done := bnReLUTermsWide(any(t).([]float32), x32, any(dy).([]float32), float32(ch.alpha), float32(ch.beta), float32(ch.scale), float32(ch.bias), timesXhat)
	for i := done; i < len(x); i++ {
		t[i] = ch.elem(x[i], dy[i], timesXhat)
	}
	return t
}

// rowSums is what bnSumKernel adds up for one plane of terms t in rows of
// w: each row's sum from 0 in index order (rowSum's), the rows' sums added
// in order to 0. Four rows are summed side by side, each in its own order,
// so that one addition need not wait for the one before.
func rowSums[T float](t []T, w int) T {
	var acc T
	r := 0
	for ; r+4*w <= len(t); r += 4 * w {
		r0 := t[r : r+w]
		r1, r2, r3 := t[r+w:][:len(r0)], t[r+2*w:][:len(r0)], t[r+3*w:][:len(r0)]
		var a0, a1, a2, a3 T
		for i, v := range r0 {
			a0 += v
			a1 += r1[i]
			a2 += r2[i]
			a3 += r3[i]
		}
		acc += a0
		acc += a1
		acc += a2
		acc += a3
	}
	for ; r < len(t); r += w {
		var a T
		for _, v := range t[r : r+w] {
			a += v
		}
		acc += a
	}
	return acc
}

// elem is one element of what rowSum adds up.
func (ch bnChannel[T]) elem(x, dy T, timesXhat bool) T {
	xhat := x*ch.alpha + ch.beta
	if ch.relu {
		dy *= mask(T(ch.scale*xhat) + ch.bias)
	}
	if timesXhat {
		return T(dy * xhat)
	}
	return dy
}

func bnApplyKernel[T float](y []T, in [][]T, op *bnApply) {
	x := in[0]
	parallel(op.c, op.b*op.s, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			ch := channel(in[1], op, c)
			for b := 0; b < op.b; b++ {
				at := (b*op.c + c) * op.s
				ch.forward(y[at:at+op.s], x[at:at+op.s])
			}
		}
	})
}

func bnGradKernel[T float](out []T, in [][]T, op *bnGrad, training bool) {
	x, stats, dy := in[0], in[1], in[2]
	if op.what != gradX {
		bnSumKernel(out, x, dy, stats, op)
		return
	}
	n := op.b * op.s
	parallel(op.c, n, func(lo, hi int) {
		c := lo
		for ; c+8 <= hi; c += 8 { // 8 channels' sums side by side
			sums, ok := gradSums8(out, x, dy, stats, op, c)
			if !ok {
				break
			}
			for j := range 8 {
				finishGradX(out, x, stats, op, c+j, sums[j], sums[8+j], training)
			}
		}
		for ; c < hi; c++ {
			ch := channel(stats, op.bnApply, c)
			mean := stats[c]
			// gorgonia's batchnormDiffOp on g, the gradient of x̂.
			var sum, dotp T
			for b := 0; b < op.b; b++ {
				at := (b*op.c + c) * op.s
				g, xs := out[at:at+op.s], x[at:at+op.s]
				ch.upstream(g, xs, dy[at:at+op.s])
				if op.s == 1 {
					for i, v := range g {
						sum += v
						dotp += (xs[i] - mean) * v
					}
				} else {
					gradXSums(g, xs, mean, &sum, &dotp)
				}
			}
			finishGradX(out, x, stats, op, c, sum, dotp, training)
		}
	})
}

// gradXSums adds a plane's terms into bnGradKernel's two sums of a
// channel, element after element: sum += g[i], dotp += x[i]·g[i] −
// mean·g[i].
func gradXSums[T float](g, xs []T, mean T, sum, dotp *T) {
	s, d := *sum, *dotp
	for i, v := range g {
		s += v
		d += xs[i]*v - mean*v
	}
	*sum, *dotp = s, d
}

// gradSums8 computes upstream's gradient into out for the 8 channels from
// c, every image, and their two sums (sums[j], sums[8+j] for channel c+j)
// with the vector kernel (gradSumsWide) — each channel's additions in
// gradXSums's order — and the elements past a plane's multiple of 8 after
// it. It reports false, computing nothing, where there is no kernel (not
// float32, or none on this CPU) or a plane is shorter than 8.
func gradSums8[T float](out, x, dy, stats []T, op *bnGrad, c int) (sums [16]T, ok bool) {
	o, ok1 := any(out).([]float32)
	xs, ok2 := any(x).([]float32)
	if !ok1 || !ok2 || !wideBN || op.s < 8 {
		return sums, false
	}
	var mean [8]float32
	for j := range mean {
		mean[j] = float32(stats[c+j])
	}
	for j := range 8 {
		ch := channel(stats, op.bnApply, c+j)
		for b := 0; b < op.b; b++ {
			at := (b*op.c + c + j) * op.s
			ch.upstream(out[at:at+op.s], x[at:at+op.s], dy[at:at+op.s])
		}
	}
	var acc [16]float32
	for b := 0; b < op.b; b++ {
		at := (b*op.c + c) * op.s
		// Every plane's first op.s&^7 elements, then the rest of each, in order.
		done := gradSumsWide(o, xs, at, op.s, &mean, &acc)
		for j := range 8 {
			from := at + j*op.s
			gradXSums(o[from+done:from+op.s], xs[from+done:from+op.s], mean[j], &acc[j], &acc[8+j])
		}
	}
	for j, v := range acc {
		sums[j] = T(v)
	}
	return sums, true
}

// finishGradX finishes bnGradKernel's gradient of x for channel c, whose two
// sums over the batch are sum and dotp: g (in out) becomes the gradient.
func finishGradX[T float](out, x, stats []T, op *bnGrad, c int, sum, dotp T, training bool) {
	n := op.b * op.s
	mean, invstd := stats[c], stats[op.c+c]
	for b := 0; b < op.b; b++ {
		at := (b*op.c + c) * op.s
		g, xs := out[at:at+op.s], x[at:at+op.s]
		switch {
		case !training:
			for i := range g {
				g[i] *= invstd
			}
		case op.s == 1:
			k, gradMean := dotp*invstd*invstd/T(n), sum/T(n)
			for i, v := range xs {
				g[i] = (g[i] - (v-mean)*k - gradMean) * invstd
			}
		default:
			k, gradMean := dotp*invstd*invstd/T(n), sum/T(n)
			done := 0
			if g32, ok := any(g).([]float32); ok {
				done = gradFinishWide(g32, any(xs).([]float32), float32(gradMean), float32(mean), float32(k), float32(invstd))
			}
			for i, v := range xs[done:] {
				g[done+i] = (g[done+i] - gradMean - (v-mean)*k) * invstd
			}
		}
	}
}

// bnSumKernel is the gradient of scale or bias: the sum along the broadcast
// axes. For gorgonia.BatchNorm's own broadcast of a (1, C, 1, 1) tensor
// over (B, C, H, W) — Repeats along 0, 2 and 3, so sums along 3 and 2 from
// 0 and along 0 from the first image — channel by channel without a
// temporary; any other broadcast through sumAlong.
func bnSumKernel[T float](out, x, dy, stats []T, op *bnGrad) {
	timesXhat := op.what == gradScale
	axes := op.fused.ScaleAxes
	if !timesXhat {
		axes = op.fused.BiasAxes
	}
	if op.shape.Dims() == 4 && len(axes) == 3 && axes[0] == 0 && axes[1] == 2 && axes[2] == 3 {
		w := op.shape[3]
		var buf []T
		if op.fused.ReLU && op.s >= 8 {
			buf = scratch[T](&op.terms, op.c*op.s)
		}
		parallel(op.c, op.b*op.s, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				ch := channel(stats, op.bnApply, c)
				var total T
				for b := 0; b < op.b; b++ {
					var acc T
					from := (b*op.c + c) * op.s
					var t []T
					if buf != nil {
						t = ch.terms(buf[c*op.s:(c+1)*op.s], x[from:from+op.s], dy[from:from+op.s], timesXhat)
					}
					if t != nil {
						acc = rowSums(t, w)
					} else {
						for at := from; at < from+op.s; at += w {
							acc += ch.rowSum(x[at:at+w], dy[at:at+w], timesXhat)
						}
					}
					if b == 0 {
						total = acc
					} else {
						total += acc
					}
				}
				out[c] = total
			}
		})
		return
	}
	g := make([]T, len(x))
	for c := 0; c < op.c; c++ {
		ch := channel(stats, op.bnApply, c)
		for b := 0; b < op.b; b++ {
			for at := (b*op.c + c) * op.s; at < (b*op.c+c+1)*op.s; at++ {
				g[at] = ch.elem(x[at], dy[at], timesXhat)
			}
		}
	}
	copy(out, sumAlong(g, op.shape, axes))
}

// sumAlong sums g (of shape) along axes, the last first, as gorgonia's
// Repeat gradients do: one tensor.Sum per axis, each adding in index order,
// starting from 0 along the tensor's last axis and from the first element
// along any other.
func sumAlong[T float](g []T, shape tensor.Shape, axes []int) []T {
	cur := append([]int(nil), shape...)
	for k := len(axes) - 1; k >= 0; k-- {
		a := axes[k]
		outer, inner := 1, 1
		for i := 0; i < a; i++ {
			outer *= cur[i]
		}
		for i := a + 1; i < len(cur); i++ {
			inner *= cur[i]
		}
		n := cur[a]
		last := a == len(cur)-1
		red := make([]T, outer*inner)
		for o := 0; o < outer; o++ {
			for in := 0; in < inner; in++ {
				var acc T
				start := 0
				if !last {
					acc, start = g[o*n*inner+in], 1
				}
				for j := start; j < n; j++ {
					acc += g[(o*n+j)*inner+in]
				}
				red[o*inner+in] = acc
			}
		}
		g = red
		cur = append(cur[:a], cur[a+1:]...)
	}
	return g
}
