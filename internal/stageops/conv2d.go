package stageops

import (
	"fmt"
	"sync"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Conv is the whole of gorgonia.Conv2d as one op: Im2Col's patch matrix
// and ConvGEMM's product, without the patch matrix. It builds the patches
// of a few output rows of one image at a time in a small buffer
// (convBlockBytes, so that it stays in the core's cache while the product
// reads it) and multiplies that block: the forward by the filter, and, in
// the backward, the output gradient's block by the filter (whose result
// col2im adds into the input gradient at once) and by the output gradient
// for the filter gradient (the patches built again from the input). The
// patch matrix — B·H'·W' rows of C·kh·kw values, 0.9 MiB for the CNN's
// second layer — is never written out.
//
// Every element is the same products added in the same order as
// Im2Col followed by ConvGEMM, so with gonum's BLAS the results are
// gorgonia's bit for bit: the forward's dot products are cut along K
// where gonum's product of the whole patch matrix cuts them (pieces of 64
// when gonum blocks that product, whole otherwise) and each piece is added
// in order, and splitting the rows (M) of a product changes no element's
// order; the gradients' products add row updates (axpy), in order of the
// output gradient's channel (input gradient) or of the image and pixel
// (filter gradient), which no cut of the rows or of K in order changes.
type Conv struct {
	ic   Im2Col
	cout int
	key  string
}

// convBlockBytes bounds a block of patches: a few output rows of one
// image (one at least), small enough to stay in a core's cache beside the
// filter. Tests shrink it to cut a convolution into many blocks.
var convBlockBytes = 32 << 10

// NewConv describes gorgonia.Conv2d with im2col op (for input shape in)
// and cout filters.
func NewConv(op gorgonia.Op, in tensor.Shape, cout int) (Conv, error) {
	ic, err := NewIm2Col(op, in)
	if err != nil {
		return Conv{}, err
	}
	if cout < 1 {
		return Conv{}, errors.Errorf("stageops: convolution with %d filters", cout)
	}
	return Conv{ic: ic, cout: cout, key: fmt.Sprintf("%s-c%d", ic.key, cout)}, nil
}

func (cv Conv) filterShape() tensor.Shape { return tensor.Shape{cv.cout, cv.ic.Shape()[1]} }
func (cv Conv) outShape() tensor.Shape {
	return tensor.Shape{cv.ic.b, cv.cout, cv.ic.outH, cv.ic.outW}
}

// Apply builds the convolution of x (B, C, H, W) with the flattened filter
// f (C', C·kh·kw): (B, C', H', W').
func (cv Conv) Apply(x, f *gorgonia.Node) (*gorgonia.Node, error) {
	if !x.Shape().Eq(cv.ic.inShape()) || !f.Shape().Eq(cv.filterShape()) {
		return nil, errors.Errorf("stageops: convolution of %v by %v, applied to %v by %v", cv.ic.inShape(), cv.filterShape(), x.Shape(), f.Shape())
	}
	return gorgonia.ApplyOp(cv.op(convOut, "conv2d-"), x, f)
}

func (cv Conv) op(part convPart, prefix string) *conv2d {
	return &conv2d{named: named{prefix + cv.key}, Conv: cv, part: part, bufs: &convBuffers{}}
}

// conv2d is a Conv's forward (convOut: y from x, F), input gradient
// (convPatchGrad: dx from dy, F) or filter gradient (convFilterGrad: dF from
// dy, x).
type conv2d struct {
	named
	Conv
	part convPart
	bufs *convBuffers
}

func (op *conv2d) Arity() int { return 2 }
func (op *conv2d) Type() hm.Type {
	switch op.part {
	case convPatchGrad:
		return fnType(4, 4, 2)
	case convFilterGrad:
		return fnType(2, 4, 4)
	}
	return fnType(4, 4, 2)
}

// inputs are the op's input shapes.
func (op *conv2d) inputs() [2]tensor.Shape {
	switch op.part {
	case convPatchGrad:
		return [2]tensor.Shape{op.outShape(), op.filterShape()}
	case convFilterGrad:
		return [2]tensor.Shape{op.outShape(), op.ic.inShape()}
	}
	return [2]tensor.Shape{op.ic.inShape(), op.filterShape()}
}

func (op *conv2d) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	switch op.part {
	case convPatchGrad:
		return op.ic.inShape(), nil
	case convFilterGrad:
		return op.filterShape(), nil
	}
	return op.outShape(), nil
}
func (op *conv2d) DiffWRT(int) []bool { return []bool{op.part == convOut, op.part == convOut} }
func (op *conv2d) SymDiff(inputs gorgonia.Nodes, _, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.part != convOut {
		return nil, op.errorf("no second derivative")
	}
	dx, err := gorgonia.ApplyOp(op.Conv.op(convPatchGrad, "conv2d-dx-"), grad, inputs[1])
	if err != nil {
		return nil, err
	}
	df, err := gorgonia.ApplyOp(op.Conv.op(convFilterGrad, "conv2d-dfilter-"), grad, inputs[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx, df}, nil
}

func (op *conv2d) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo is Do writing its result into prealloc where that fits
// (output).
func (op *conv2d) UsePreallocDo(prealloc gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.safely(func() (gorgonia.Value, error) {
		in := op.inputs()
		ts, err := op.denseInputs(vals, in[0], in[1])
		if err != nil {
			return nil, err
		}
		shape, _ := op.InferShape()
		out := output(prealloc, ts[0], shape, op.part == convPatchGrad) // col2im adds into zeros
		bl := tensor.WhichBLAS()
		switch ts[0].Dtype() {
		case tensor.Float32:
			convBlocks(op, bl.Sgemm, ts[0].Float32s(), ts[1].Float32s(), out.Float32s())
		default:
			convBlocks(op, bl.Dgemm, ts[0].Float64s(), ts[1].Float64s(), out.Float64s())
		}
		return out, nil
	})
}

// convBuffers holds a conv2d's block buffers between runs, one pair per
// goroutine that computes at once.
type convBuffers struct {
	mu   sync.Mutex
	free []any
}

// convBuf is one goroutine's buffers: a block of patches (or of their
// gradient) and of the forward's product before it goes to NCHW.
type convBuf[T float] struct{ patches, prod []T }

func takeBuf[T float](bs *convBuffers, patches, prod int) *convBuf[T] {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for i, b := range bs.free {
		if cb, ok := b.(*convBuf[T]); ok && len(cb.patches) == patches && len(cb.prod) == prod {
			bs.free = append(bs.free[:i], bs.free[i+1:]...)
			return cb
		}
	}
	return &convBuf[T]{make([]T, patches), make([]T, prod)}
}

func (bs *convBuffers) give(b any) {
	bs.mu.Lock()
	bs.free = append(bs.free, b)
	bs.mu.Unlock()
}

// convBlocks runs op block by block: each block is rows output rows
// (rows·W' patches) of one image. a is the first input (x or dy), b the
// second (F, or x for the filter gradient).
func convBlocks[T float](op *conv2d, g gemm[T], a, b, out []T) {
	ic, cout := op.ic, op.cout
	k := ic.Shape()[1]
	hw := ic.outH * ic.outW
	var zero T
	rows := max(1, convBlockBytes/(int(sizeOf(zero))*ic.outW*k))
	rows = min(rows, ic.outH)
	blockLen := rows * ic.outW * k
	// The forward's pieces of K: gonum cuts the whole product's dot
	// products into pieces of 64 when it blocks that product.
	piece := k
	if blockedGemm(ic.b*hw, cout, k, false) {
		piece = gemmBlock
	}
	imSize, outSize := ic.c*ic.h*ic.w, cout*hw
	block := func(buf *convBuf[T], img, oh0 int) {
		oh1 := min(oh0+rows, ic.outH)
		m, p0 := (oh1-oh0)*ic.outW, oh0*ic.outW
		patch := buf.patches[:m*k]
		switch op.part {
		case convOut:
			// y's block: the patches times Fᵀ, piece by piece of K, into
			// (pixel, filter), then copied to NCHW.
			patchRows(a[img*imSize:(img+1)*imSize], patch, ic, oh0, oh1, false)
			prod := buf.prod[:m*cout]
			for l0 := 0; l0 < k; l0 += piece {
				beta := T(1)
				if l0 == 0 {
					beta = 0
				}
				g(blas.NoTrans, blas.Trans, m, cout, min(piece, k-l0), 1, patch[l0:], k, b[l0:], k, beta, prod, cout)
			}
			dst := out[img*outSize : (img+1)*outSize]
			for p := range m {
				for c, v := range prod[p*cout : (p+1)*cout] {
					dst[c*hw+p0+p] = v
				}
			}
		case convPatchGrad:
			// dP's block: dy's block transposed times F (TN), added into
			// dx by col2im.
			dy := a[img*outSize : (img+1)*outSize]
			g(blas.Trans, blas.NoTrans, m, k, cout, 1, dy[p0:], hw, b, k, 0, patch, k)
			patchRows(out[img*imSize:(img+1)*imSize], patch, ic, oh0, oh1, true)
		case convFilterGrad:
			// dF += dy's block times the block's patches (NN), blocks in
			// order of image and pixel.
			dy := a[img*outSize : (img+1)*outSize]
			patchRows(b[img*imSize:(img+1)*imSize], patch, ic, oh0, oh1, false)
			beta := T(1)
			if img == 0 && oh0 == 0 {
				beta = 0
			}
			g(blas.NoTrans, blas.NoTrans, cout, k, m, 1, dy[p0:], hw, patch, k, beta, out, k)
		}
	}
	images := func(lo, hi int) {
		buf := takeBuf[T](op.bufs, blockLen, rows*ic.outW*cout)
		defer op.bufs.give(buf)
		for img := lo; img < hi; img++ {
			for oh0 := 0; oh0 < ic.outH; oh0 += rows {
				block(buf, img, oh0)
			}
		}
	}
	if op.part == convFilterGrad { // one sum over every image, in order
		images(0, ic.b)
		return
	}
	parallel(ic.b, hw*k*cout, images)
}

// sizeOf is the bytes of a T.
func sizeOf[T float](T) uintptr {
	var z T
	switch any(z).(type) {
	case float32:
		return 4
	}
	return 8
}
