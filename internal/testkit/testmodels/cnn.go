package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CNN builds a small convolutional network:
//
//	x (batch, 1, 8, 8)
//	→ conv1 3×3 pad 1, 1→4 channels (batch, 4, 8, 8) → BatchNorm → Rectify
//	→ MaxPool2D 2×2 stride 2 (batch, 4, 4, 4)
//	→ conv2 3×3 pad 1, 4→8 channels (batch, 8, 4, 4) → BatchNorm → Rectify
//	→ Reshape (batch, 128)
//	→ fc 128→NumClasses
//	→ log-softmax cross-entropy against y (batch, NumClasses).
//
// The convolutions have no bias (the following BatchNorm would cancel it).
// BatchNorm is gorgonia.BatchNorm in training mode with explicit (1, C, 1, 1)
// scale and bias learnables. Learnables (8): conv1.W, bn1.scale, bn1.bias,
// conv2.W, bn2.scale, bn2.bias, fc.W, fc.b.
func CNN(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name = "cnn"
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, 1, 8, 8)
	y := b.input("y", true, batch, NumClasses)

	h, err := b.conv("conv1", x, 1, 4)
	if err != nil {
		return nil, wrap(name, err)
	}
	if h, err = b.batchNorm("bn1", h); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = b.conv("conv2", h, 4, 8); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = b.batchNorm("bn2", h); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.Reshape(h, tensor.Shape{batch, 8 * 4 * 4}); err != nil {
		return nil, wrap(name, err)
	}
	logits, err := b.linear("fc", h, 8*4*4, NumClasses)
	if err != nil {
		return nil, wrap(name, err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}
