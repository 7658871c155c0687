package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MLP builds a three-layer perceptron:
//
//	x (batch, 16)
//	→ fc1 16→16, Rectify
//	→ fc2 16→8, Tanh
//	→ fc3 8→NumClasses
//	→ log-softmax cross-entropy (mean over the batch) against y (batch, NumClasses).
//
// Each fc layer is x·W + b with W (in, out) and a (1, out) bias added with
// BroadcastAdd. Learnables (6): fc1.W, fc1.b, fc2.W, fc2.b, fc3.W, fc3.b.
func MLP(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name = "mlp"
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	cost, err := perceptron(b)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}

// perceptron adds MLP's inputs, layers and cross-entropy to b.
func perceptron(b *builder) (*gorgonia.Node, error) {
	x := b.input("x", false, b.batch, 16)
	y := b.input("y", true, b.batch, NumClasses)

	h, err := b.linear("fc1", x, 16, 16)
	if err != nil {
		return nil, err
	}
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, err
	}
	if h, err = b.linear("fc2", h, 16, 8); err != nil {
		return nil, err
	}
	if h, err = gorgonia.Tanh(h); err != nil {
		return nil, err
	}
	logits, err := b.linear("fc3", h, 8, NumClasses)
	if err != nil {
		return nil, err
	}
	return b.crossEntropy(logits, y)
}
