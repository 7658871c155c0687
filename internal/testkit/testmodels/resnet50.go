package testmodels

import (
	"fmt"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ResNet50 builds ResNet-50 (He et al. 2016, v1 with projection shortcuts)
// on 224×224 RGB images and 1000 classes, the model the PipeMare paper cuts
// into 107 stages: a 7×7/2 convolution with BatchNorm, ReLU and a 3×3/2
// max-pool, then 3, 4, 6 and 3 bottleneck blocks (1×1, 3×3, 1×1
// convolutions, each with BatchNorm, widths 64, 128, 256 and 512 expanded
// ×4; the first block of each group projects its shortcut with a 1×1
// convolution and BatchNorm, strided from the second group on), global
// average pooling (a mean over the pixels) and a linear classifier: 53
// convolutions, 53 BatchNorms, 25,557,032 parameters.
//
// It is built to be split and measured, not trained: it is not among All(),
// and an image costs gigaflops. Any batch from 1 up. Learnables in graph order: each
// convolution's filter, then its BatchNorm's scale and bias; fc.W and fc.b
// last.
func ResNet50(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name = "resnet50"
	if batch < 1 {
		return nil, errors.Errorf("testmodels: %s: batch size must be positive, got %d", name, batch)
	}
	// Microbatch 1 is the paper's setting: every BatchNorm here
	// normalises over at least 7×7 pixels, so the two-sample rule of the
	// other models does not apply.
	b, err := newBuilder(name, dt, 2, seed)
	if err != nil {
		return nil, err
	}
	b.batch = batch
	x := b.input("x", false, batch, 3, 224, 224)
	y := b.input("y", true, batch, 1000)

	h, err := b.convBN("conv1", x, 3, 64, 7, 2, 3, true)
	if err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.MaxPool2D(h, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}); err != nil {
		return nil, wrap(name, err)
	}
	in := 64
	for g, blocks := range []int{3, 4, 6, 3} {
		width := 64 << g
		for i := 0; i < blocks; i++ {
			stride := 1
			if i == 0 && g > 0 {
				stride = 2
			}
			if h, err = b.bottleneck(fmt.Sprintf("layer%d.%d", g+1, i), h, in, width, stride, i == 0); err != nil {
				return nil, wrap(name, err)
			}
			in = 4 * width
		}
	}
	side := h.Shape()[2] * h.Shape()[3]
	if h, err = gorgonia.Reshape(h, tensor.Shape{batch, in, side}); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.Mean(h, 2); err != nil {
		return nil, wrap(name, err)
	}
	logits, err := b.linear("fc", h, in, 1000)
	if err != nil {
		return nil, wrap(name, err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}

// bottleneck is y = ReLU(s + BN(conv1×1(ReLU(BN(conv3×3(ReLU(BN(conv1×1(x)))))))))
// with s = x, or its projection BN(conv1×1/stride(x)).
func (b *builder) bottleneck(name string, x *gorgonia.Node, in, width, stride int, project bool) (*gorgonia.Node, error) {
	h, err := b.convBN(name+".conv1", x, in, width, 1, 1, 0, true)
	if err != nil {
		return nil, err
	}
	if h, err = b.convBN(name+".conv2", h, width, width, 3, stride, 1, true); err != nil {
		return nil, err
	}
	if h, err = b.convBN(name+".conv3", h, width, 4*width, 1, 1, 0, false); err != nil {
		return nil, err
	}
	s := x
	if project {
		if s, err = b.convBN(name+".shortcut", x, in, 4*width, 1, stride, 0, false); err != nil {
			return nil, err
		}
	}
	if h, err = gorgonia.Add(s, h); err != nil {
		return nil, errors.Wrapf(err, "%s: skip", name)
	}
	return gorgonia.Rectify(h)
}

// convBN is a k×k convolution (no bias) with the given stride and padding,
// then BatchNorm, then ReLU if relu.
func (b *builder) convBN(name string, x *gorgonia.Node, inC, outC, k, stride, pad int, relu bool) (*gorgonia.Node, error) {
	w := b.glorot(name+".W", inC*k*k, outC*k*k, outC, inC, k, k)
	h, err := gorgonia.Conv2d(x, w, tensor.Shape{k, k}, []int{pad, pad}, []int{stride, stride}, []int{1, 1})
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	if h, err = b.batchNorm(name+".bn", h); err != nil {
		return nil, err
	}
	if relu {
		return gorgonia.Rectify(h)
	}
	return h, nil
}
