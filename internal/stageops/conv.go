package stageops

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/pipemare/pipemare/internal/reach"
	"github.com/pkg/errors"
	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Im2Col is gorgonia's im2col (the first op of gorgonia.Conv2d) followed by
// the Reshape to the patch matrix that Conv2d's GEMM reads: one op that
// writes the (B·H'·W', C·kh·kw) matrix directly, instead of a 4-d tensor
// that the reshape then copies. Its gradient is gorgonia's col2im. Values
// are the same copies, gradients the same sums in the same order.
type Im2Col struct {
	kh, kw, padH, padW, strideH, strideW, dilH, dilW int
	b, c, h, w, outH, outW                           int
	key                                              string
}

// NewIm2Col reads op, the op of a gorgonia im2col node, for input shape in.
func NewIm2Col(op gorgonia.Op, in tensor.Shape) (Im2Col, error) {
	if reach.TypeString(op) != "gorgonia.im2colOp" {
		return Im2Col{}, errors.Errorf("stageops: %v (%T) is not gorgonia's im2col", op, op)
	}
	var f [8]int
	for i, name := range []string{"h", "w", "padH", "padW", "strideH", "strideW", "dilationH", "dilationW"} {
		var err error
		if f[i], err = reach.Int(op, name); err != nil {
			return Im2Col{}, errors.Wrap(err, "stageops: reading gorgonia's im2colOp")
		}
	}
	if in.Dims() != 4 {
		return Im2Col{}, errors.Errorf("stageops: im2col of shape %v: want (B, C, H, W)", in)
	}
	ic := Im2Col{kh: f[0], kw: f[1], padH: f[2], padW: f[3], strideH: f[4], strideW: f[5], dilH: f[6], dilW: f[7],
		b: in[0], c: in[1], h: in[2], w: in[3]}
	ic.outH = (ic.h+2*ic.padH-(ic.dilH*(ic.kh-1)+1))/ic.strideH + 1
	ic.outW = (ic.w+2*ic.padW-(ic.dilW*(ic.kw-1)+1))/ic.strideW + 1
	ic.key = fmt.Sprintf("%v-k%dx%d-p%dx%d-s%dx%d-d%dx%d", in, ic.kh, ic.kw, ic.padH, ic.padW, ic.strideH, ic.strideW, ic.dilH, ic.dilW)
	return ic, nil
}

// Shape is the patch matrix's shape, (B·H'·W', C·kh·kw).
func (ic Im2Col) Shape() tensor.Shape {
	return tensor.Shape{ic.b * ic.outH * ic.outW, ic.c * ic.kh * ic.kw}
}

func (ic Im2Col) inShape() tensor.Shape { return tensor.Shape{ic.b, ic.c, ic.h, ic.w} }

// Apply builds the patch matrix of x.
func (ic Im2Col) Apply(x *gorgonia.Node) (*gorgonia.Node, error) {
	if !x.Shape().Eq(ic.inShape()) {
		return nil, errors.Errorf("stageops: im2col built for %v, applied to %v", ic.inShape(), x.Shape())
	}
	return gorgonia.ApplyOp(&im2col{named{"im2col2d-" + ic.key}, ic}, x)
}

type im2col struct {
	named
	Im2Col
}

func (op *im2col) Arity() int    { return 1 }
func (op *im2col) Type() hm.Type { return fnType(2, 4) }
func (op *im2col) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.Shape(), nil
}
func (op *im2col) DiffWRT(int) []bool { return []bool{true} }
func (op *im2col) SymDiff(_ gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	dx, err := gorgonia.ApplyOp(&col2im{named{"col2im2d-" + op.key}, op.Im2Col}, grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx}, nil
}
func (op *im2col) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *im2col) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) { return op.run(op.named, prealloc, vals, false) })
}

// run is im2col (back false: image in, patch matrix out) or col2im.
func (ic Im2Col) run(n named, prealloc gorgonia.Value, vals []gorgonia.Value, back bool) (gorgonia.Value, error) {
	from, to := ic.inShape(), ic.Shape()
	if back {
		from, to = to, from
	}
	if len(vals) != 1 {
		return nil, n.errorf("takes 1 input, got %d", len(vals))
	}
	in, err := dense(n.desc, vals[0], from)
	if err != nil {
		return nil, err
	}
	out := output(prealloc, in, to, back) // col2im adds into zeros
	im, col := in, out
	if back {
		im, col = out, in
	}
	switch in.Dtype() {
	case tensor.Float32:
		patches(im.Float32s(), col.Float32s(), ic, back)
	default:
		patches(im.Float64s(), col.Float64s(), ic, back)
	}
	return out, nil
}

// col2im adds the patch matrix's gradient back into the image's: for each
// image, in gorgonia's col2im order.
type col2im struct {
	named
	Im2Col
}

func (op *col2im) Arity() int    { return 1 }
func (op *col2im) Type() hm.Type { return fnType(4, 2) }
func (op *col2im) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.inShape(), nil
}
func (op *col2im) DiffWRT(int) []bool { return []bool{false} }
func (op *col2im) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, op.errorf("no second derivative")
}
func (op *col2im) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *col2im) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) { return op.run(op.named, prealloc, vals, true) })
}

// patches walks gorgonia's im2col loop for every image: it copies the image
// into the patch matrix, or (back) adds the patch matrix into the zeroed
// image. The loop runs output row, channel, kernel row, output column,
// kernel column — gorgonia's runs output row, output column, channel,
// kernel row, kernel column — so that one image row is read for a whole
// row of patches; an image element's contributions are still added in
// gorgonia's order (for one output row and channel, a given image row is
// kernel row at most one, so only the output and kernel columns vary, in
// the same order). Windows that lie on the image skip the bounds checks.
//
// A 3-wide kernel row at dilation 1 copies (adds) its interior columns
// three values at a time (kernelRows3) and its edge columns with edge; a
// 3×3 kernel at dilation 1 (every zoo convolution), where all three kernel
// rows lie on the image, the whole 3×3 window of a channel at once
// (kernelBlocks3): kernel row and output column swap, which keeps each
// image element's order, its rows being distinct.
func patches[T float](im, col []T, ic Im2Col, back bool) {
	imSize := ic.c * ic.h * ic.w
	k := ic.kh * ic.kw
	patch := ic.c * k // one patch: a row of the matrix
	colSize := ic.outH * ic.outW * patch
	// The output columns [in0, in1) whose 3-wide windows lie on the image.
	in0, in1 := 0, 0
	rows3 := ic.kw == 3 && ic.dilW == 1
	block := rows3 && ic.kh == 3 && ic.dilH == 1
	if rows3 {
		in0 = min((ic.padW+ic.strideW-1)/ic.strideW, ic.outW)
		if last := ic.w - 3 + ic.padW; last >= 0 {
			in1 = max(in0, min(ic.outW, last/ic.strideW+1))
		} else {
			in1 = in0
		}
	}
	parallel(ic.b, colSize, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			img, cl := im[b*imSize:(b+1)*imSize], col[b*colSize:(b+1)*colSize]
			for oh := 0; oh < ic.outH; oh++ {
				rows := cl[oh*ic.outW*patch : (oh+1)*ic.outW*patch]
				r0 := -ic.padH + oh*ic.strideH // kernel row 0's image row
				for ch := 0; ch < ic.c; ch++ {
					plane := img[ch*ic.h*ic.w : (ch+1)*ic.h*ic.w]
					if block && in0 < in1 && r0 >= 0 && r0+3 <= ic.h {
						for ow := 0; ow < ic.outW; ow++ {
							if ow == in0 {
								kernelBlocks3(rows[ow*patch+ch*k:], plane[r0*ic.w+ow*ic.strideW-ic.padW:], ic.w, ic.strideW, patch, in1-in0, back)
								ow = in1 - 1
								continue
							}
							c0 := ow*ic.strideW - ic.padW
							for kr := range 3 {
								at := ow*patch + ch*k + kr*3
								edge(rows[at:at+3], plane[(r0+kr)*ic.w:(r0+kr+1)*ic.w], c0, 1, back)
							}
						}
						continue
					}
					for kr := 0; kr < ic.kh; kr++ {
						r := r0 + kr*ic.dilH
						at := ch*k + kr*ic.kw // in each patch
						if r < 0 || r >= ic.h {
							if !back {
								for ow := 0; ow < ic.outW; ow++ {
									clear(rows[ow*patch+at : ow*patch+at+ic.kw])
								}
							}
							continue
						}
						src := plane[r*ic.w : (r+1)*ic.w]
						for ow := 0; ow < ic.outW; ow++ {
							if ow == in0 && in0 < in1 {
								kernelRows3(rows[ow*patch+at:], src[ow*ic.strideW-ic.padW:], ic.strideW, patch, in1-in0, back)
								ow = in1 - 1
								continue
							}
							if rows3 {
								edge(rows[ow*patch+at:ow*patch+at+3], src, ow*ic.strideW-ic.padW, 1, back)
								continue
							}
							window(rows[ow*patch+at:ow*patch+at+ic.kw], src, ow, ic, back)
						}
					}
				}
			}
		}
	})
}

// window copies into dst the kernel row of output column ow from src, one
// image row (zeros off the image), or (back) adds dst into src.
func window[T float](dst, src []T, ow int, ic Im2Col, back bool) {
	span := (ic.kw-1)*ic.dilW + 1 // columns a kernel row covers
	c0 := ow*ic.strideW - ic.padW
	if c0 >= 0 && c0+span <= ic.w { // on the image
		win := src[c0 : c0+span]
		switch {
		case back && ic.dilW == 1:
			for kc, v := range dst {
				win[kc] += v
			}
		case back:
			for kc, v := range dst {
				win[kc*ic.dilW] += v
			}
		case ic.dilW == 1:
			for kc, v := range win { // a kernel row is a few values: a copy's call costs more
				dst[kc] = v
			}
		default:
			for kc := range dst {
				dst[kc] = win[kc*ic.dilW]
			}
		}
		return
	}
	edge(dst, src, c0, ic.dilW, back)
}

// ConvGEMM is the rest of gorgonia.Conv2d: the GEMM of the patch matrix P
// (B·H'·W', K) with the flattened filter F (C', K) transposed, its Reshape
// to (B, H', W', C') and the Transpose to (B, C', H', W') — as one op whose
// output is the NCHW tensor, with no 4-d intermediate and no gorgonia
// transpose (a generic strided iteration, in the forward and again for the
// gradient in the backward). The forward is gorgonia's GEMM call itself
// followed by a plain copy into NCHW; the gradients are the two GEMMs of
// gorgonia's matmul gradient, image by image, reading the output gradient
// in NCHW as it comes.
//
// With gonum's BLAS (gorgonia's default) every gradient element is the same
// products added in the same order as gorgonia's (its kernels for these two
// GEMMs accumulate row updates, whose order does not depend on how the
// matrices are cut), so the results are bit-identical; another BLAS
// (gorgonia.Use) cuts and orders the gradient GEMMs its own way, equal to
// float rounding.
type ConvGEMM struct {
	b, h, w, cout, k int
	// noPatchGrad: nothing needs the patch matrix's gradient
	// (WithoutPatchGrad).
	noPatchGrad bool
}

// NewConvGEMM describes the convolution of B images of H'×W' patches of K
// values each by C' filters.
func NewConvGEMM(b, h, w, cout, k int) ConvGEMM { return ConvGEMM{b: b, h: h, w: w, cout: cout, k: k} }

// WithoutPatchGrad is cg for patches whose gradient nothing needs (those
// of data that depends on no learnable: a model's first convolution's):
// its backward computes the filter's gradient only. gorgonia's GEMM
// differentiates both operands, and a program computes the unread one at
// every step.
func (cg ConvGEMM) WithoutPatchGrad() ConvGEMM { cg.noPatchGrad = true; return cg }

func (cg ConvGEMM) key() string {
	key := fmt.Sprintf("b%d-%dx%d-c%d-k%d", cg.b, cg.h, cg.w, cg.cout, cg.k)
	if cg.noPatchGrad {
		key += "-nodpatch"
	}
	return key
}
func (cg ConvGEMM) patchShape() tensor.Shape  { return tensor.Shape{cg.b * cg.h * cg.w, cg.k} }
func (cg ConvGEMM) filterShape() tensor.Shape { return tensor.Shape{cg.cout, cg.k} }
func (cg ConvGEMM) outShape() tensor.Shape    { return tensor.Shape{cg.b, cg.cout, cg.h, cg.w} }

// Apply builds the convolution of patch matrix p with flattened filter f.
func (cg ConvGEMM) Apply(p, f *gorgonia.Node) (*gorgonia.Node, error) {
	if !p.Shape().Eq(cg.patchShape()) || !f.Shape().Eq(cg.filterShape()) {
		return nil, errors.Errorf("stageops: conv GEMM for %v × %vᵀ, applied to %v × %vᵀ", cg.patchShape(), cg.filterShape(), p.Shape(), f.Shape())
	}
	return gorgonia.ApplyOp(&convGEMM{named: named{"convgemm-" + cg.key()}, ConvGEMM: cg, part: convOut}, p, f)
}

// convPart says what a convGEMM computes.
type convPart int

const (
	convOut        convPart = iota // y (B, C', H', W') from P, F
	convPatchGrad                  // dP from dy, F
	convFilterGrad                 // dF from dy, P
)

type convGEMM struct {
	named
	ConvGEMM
	part convPart
	// nhwc is the forward's GEMM result before it is copied into NCHW,
	// kept between runs: a program's ops run in one goroutine at a time,
	// and nothing outside the op sees it.
	nhwc any
}

func (op *convGEMM) Arity() int { return 2 }
func (op *convGEMM) Type() hm.Type {
	switch op.part {
	case convPatchGrad, convFilterGrad:
		return fnType(2, 4, 2)
	}
	return fnType(4, 2, 2)
}
func (op *convGEMM) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	switch op.part {
	case convPatchGrad:
		return op.patchShape(), nil
	case convFilterGrad:
		return op.filterShape(), nil
	}
	return op.outShape(), nil
}
func (op *convGEMM) DiffWRT(int) []bool {
	return []bool{op.part == convOut && !op.noPatchGrad, op.part == convOut}
}
func (op *convGEMM) SymDiff(inputs gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.part != convOut {
		return nil, op.errorf("no second derivative")
	}
	var dp *gorgonia.Node // none WithoutPatchGrad: gorgonia skips an input DiffWRT excludes
	if !op.noPatchGrad {
		var err error
		if dp, err = gorgonia.ApplyOp(&convGEMM{named: named{"convgemm-dpatch-" + op.key()}, ConvGEMM: op.ConvGEMM, part: convPatchGrad}, grad, inputs[1]); err != nil {
			return nil, err
		}
	}
	df, err := gorgonia.ApplyOp(&convGEMM{named: named{"convgemm-dfilter-" + op.key()}, ConvGEMM: op.ConvGEMM, part: convFilterGrad}, grad, inputs[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dp, df}, nil
}

func (op *convGEMM) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *convGEMM) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		first, second := op.patchShape(), op.filterShape()
		switch op.part {
		case convPatchGrad:
			first = op.outShape()
		case convFilterGrad:
			first, second = op.outShape(), op.patchShape()
		}
		ts, err := op.denseInputs(vals, first, second)
		if err != nil {
			return nil, err
		}
		a, b := ts[0], ts[1]
		shape, _ := op.InferShape()
		out := output(prealloc, a, shape, false)
		bl := tensor.WhichBLAS()
		switch a.Dtype() {
		case tensor.Float32:
			if op.part != convOut || !convOutNCHW(bl, op.b, op.h*op.w, op.cout, op.k, a.Float32s(), b.Float32s(), out.Float32s()) {
				convKernel(bl.Sgemm, a.Float32s(), b.Float32s(), out.Float32s(), op)
			}
		default:
			convKernel(bl.Dgemm, a.Float64s(), b.Float64s(), out.Float64s(), op)
		}
		return out, nil
	})
}

// gemm is one dtype's GEMM: C = αAB + βC over row-major slices.
type gemm[T float] func(tA, tB blas.Transpose, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)

// scratch returns the buffer of n elements of T an op keeps in slot (a
// convGEMM's NHWC result, a bnGrad's terms), allocated once: a program's
// ops run in one goroutine at a time.
func scratch[T float](slot *any, n int) []T {
	if buf, ok := (*slot).([]T); ok && len(buf) == n {
		return buf
	}
	buf := make([]T, n)
	*slot = buf
	return buf
}

func convKernel[T float](g gemm[T], a, b, out []T, op *convGEMM) {
	hw := op.h * op.w
	switch op.part {
	case convOut:
		// gorgonia's call: P·Fᵀ (NT), m = B·H'·W', n = C', k = K, into
		// NHWC; then each image's (H'·W', C') block is copied transposed.
		nhwc := scratch[T](&op.nhwc, len(out))
		g(blas.NoTrans, blas.Trans, op.b*hw, op.cout, op.k, 1, a, op.k, b, op.k, 0, nhwc, op.cout)
		for img := 0; img < op.b; img++ {
			src, dst := nhwc[img*hw*op.cout:(img+1)*hw*op.cout], out[img*op.cout*hw:(img+1)*op.cout*hw]
			for p := 0; p < hw; p++ {
				for c, v := range src[p*op.cout : (p+1)*op.cout] {
					dst[c*hw+p] = v
				}
			}
		}
	case convPatchGrad:
		// gorgonia: dC·F (NN; dC is dy in NHWC): dP[l, :] accumulates
		// dC[l, c]·F[c, :] over c in order. Per image, dy_bᵀ·F (TN) does
		// the same.
		for img := 0; img < op.b; img++ {
			dy, dp := a[img*op.cout*hw:(img+1)*op.cout*hw], out[img*hw*op.k:(img+1)*hw*op.k]
			g(blas.Trans, blas.NoTrans, hw, op.k, op.cout, 1, dy, hw, b, op.k, 0, dp, op.k)
		}
	case convFilterGrad:
		// gorgonia: dCᵀ·P (TN): dF[c, :] accumulates dC[l, c]·P[l, :] over
		// l = (image, pixel) in order. Per image, dy_b·P_b (NN) into the
		// same accumulator, images in order, does the same.
		for img := 0; img < op.b; img++ {
			dy, p := a[img*op.cout*hw:(img+1)*op.cout*hw], b[img*hw*op.k:(img+1)*hw*op.k]
			beta := T(1)
			if img == 0 {
				beta = 0
			}
			g(blas.NoTrans, blas.NoTrans, op.cout, op.k, hw, 1, dy, hw, p, op.k, beta, out, op.k)
		}
	}
}

// edge copies into dst the kernel row whose columns in src, one image
// row, are c0, c0+dil, …, with zeros off the image, or (back) adds dst
// into src. Small enough to inline: patches calls it for a 3-wide kernel
// row's edge columns (2 of 7 columns in the ResNet's blocks), where a call
// of window, passing the whole Im2Col, cost more than the copies.
func edge[T float](dst, src []T, c0, dil int, back bool) {
	for kc := range dst {
		cc := c0 + kc*dil
		switch {
		case uint(cc) >= uint(len(src)):
			if !back {
				dst[kc] = 0
			}
		case back:
			src[cc] += dst[kc]
		default:
			dst[kc] = src[cc]
		}
	}
}

// kernelRows3 is patches' inner loop for n consecutive output columns of a
// 3-wide kernel row at dilation 1 and the given stride, each window on the
// image: column i's three values are src[i·stride:i·stride+3] and
// dst[i·patch:i·patch+3]. It copies src into dst, or (back) adds dst into
// src, in patches' order.
func kernelRows3[T float](dst, src []T, stride, patch, n int, back bool) {
	if back {
		for i := range n {
			d, s := (*[3]T)(dst[i*patch:]), (*[3]T)(src[i*stride:])
			s[0] += d[0]
			s[1] += d[1]
			s[2] += d[2]
		}
		return
	}
	for i := range n {
		*(*[3]T)(dst[i*patch:]) = *(*[3]T)(src[i*stride:])
	}
}

// kernelBlocks3 is kernelRows3 for the three kernel rows of a 3×3 window at
// once, image rows w apart from src: column i's nine values are
// dst[i·patch:i·patch+9]. Each image element's additions (back) come in
// output column order, as in kernelRows3: the three rows are distinct
// image rows.
func kernelBlocks3[T float](dst, src []T, w, stride, patch, n int, back bool) {
	if back {
		for i := range n {
			d := (*[9]T)(dst[i*patch:])
			s0, s1, s2 := (*[3]T)(src[i*stride:]), (*[3]T)(src[w+i*stride:]), (*[3]T)(src[2*w+i*stride:])
			s0[0] += d[0]
			s0[1] += d[1]
			s0[2] += d[2]
			s1[0] += d[3]
			s1[1] += d[4]
			s1[2] += d[5]
			s2[0] += d[6]
			s2[1] += d[7]
			s2[2] += d[8]
		}
		return
	}
	for i := range n {
		d := (*[9]T)(dst[i*patch:])
		*(*[3]T)(d[0:]) = *(*[3]T)(src[i*stride:])
		*(*[3]T)(d[3:]) = *(*[3]T)(src[w+i*stride:])
		*(*[3]T)(d[6:]) = *(*[3]T)(src[2*w+i*stride:])
	}
}
