package testmodels

import (
	"fmt"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ResNet builds a small fully connected residual network:
//
//	x (batch, 16)
//	→ stem 16→8, Tanh                                   = h0
//	→ block1: h1 = Rectify(h0 + F1(h0))
//	→ block2: h2 = Rectify(h1 + F2(h1))
//	→ block3: h3 = Rectify(h2 + F3(h2))
//	→ long skip: h = h3 + h0 (jumps over all three blocks)
//	→ head 8→NumClasses
//	→ log-softmax cross-entropy against y (batch, NumClasses),
//
// where Fi(h) = lin_i2(Rectify(lin_i1(h))) with two 8→8 fully connected
// layers, so every short skip spans two learnable layers. Learnables (16):
// stem.W, stem.b, then block{1,2,3}.fc{1,2}.{W,b} in order, then head.W,
// head.b.
func ResNet(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const (
		name   = "resnet"
		width  = 8
		blocks = 3
	)
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, 16)
	y := b.input("y", true, batch, NumClasses)

	h0, err := b.linear("stem", x, 16, width)
	if err != nil {
		return nil, wrap(name, err)
	}
	if h0, err = gorgonia.Tanh(h0); err != nil {
		return nil, wrap(name, err)
	}
	h := h0
	for i := 1; i <= blocks; i++ {
		if h, err = residualBlock(b, fmt.Sprintf("block%d", i), h, width); err != nil {
			return nil, wrap(name, err)
		}
	}
	if h, err = gorgonia.Add(h, h0); err != nil {
		return nil, wrap(name, err)
	}
	logits, err := b.linear("head", h, width, NumClasses)
	if err != nil {
		return nil, wrap(name, err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}

// residualBlock returns Rectify(x + fc2(Rectify(fc1(x)))) for x of shape
// (n, width).
func residualBlock(b *builder, name string, x *gorgonia.Node, width int) (*gorgonia.Node, error) {
	f, err := b.linear(name+".fc1", x, width, width)
	if err != nil {
		return nil, err
	}
	if f, err = gorgonia.Rectify(f); err != nil {
		return nil, errors.Wrap(err, name)
	}
	if f, err = b.linear(name+".fc2", f, width, width); err != nil {
		return nil, err
	}
	sum, err := gorgonia.Add(x, f)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: skip", name)
	}
	out, err := gorgonia.Rectify(sum)
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	return out, nil
}
