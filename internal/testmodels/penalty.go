package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// PenaltyWeight is λ of Penalty's L2 term.
const PenaltyWeight = 0.05

// Penalty builds a three-layer perceptron whose cost adds an L2 penalty on
// its first weight, as weight decay written into the cost does:
//
//	x (batch, 16)
//	→ fc1 16→16, Rectify
//	→ fc2 16→16, Tanh
//	→ fc3 16→NumClasses
//	→ cost = log-softmax cross-entropy against y + λ·Σ fc1.W², λ = PenaltyWeight.
//
// fc1.W is read by the first layer and by the cost. Learnables (6): fc1.W,
// fc1.b, fc2.W, fc2.b, fc3.W, fc3.b.
func Penalty(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name = "penalty"
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, 16)
	y := b.input("y", true, batch, NumClasses)

	h, err := b.linear("fc1", x, 16, 16)
	if err != nil {
		return nil, wrap(name, err)
	}
	w1 := b.learnables[0] // fc1.W
	if h, err = gorgonia.Rectify(h); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = b.linear("fc2", h, 16, 16); err != nil {
		return nil, wrap(name, err)
	}
	if h, err = gorgonia.Tanh(h); err != nil {
		return nil, wrap(name, err)
	}
	logits, err := b.linear("fc3", h, 16, NumClasses)
	if err != nil {
		return nil, wrap(name, err)
	}
	ce, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	sq, err := gorgonia.Square(w1)
	if err != nil {
		return nil, wrap(name, err)
	}
	l2, err := gorgonia.Sum(sq)
	if err != nil {
		return nil, wrap(name, err)
	}
	if l2, err = gorgonia.Mul(b.scalar(PenaltyWeight), l2); err != nil {
		return nil, wrap(name, err)
	}
	cost, err := gorgonia.Add(ce, l2)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}
