package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// PenaltyWeight is λ of Penalty's L2 term.
const PenaltyWeight = 0.05

// Penalty builds MLP with an L2 penalty on its first weight in the cost, as
// weight decay written into the cost does:
//
//	cost = MLP's cross-entropy + λ·Σ fc1.W², λ = PenaltyWeight.
//
// fc1.W is read by the first layer and by the cost. Learnables (6): fc1.W,
// fc1.b, fc2.W, fc2.b, fc3.W, fc3.b.
func Penalty(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name = "penalty"
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	ce, err := perceptron(b)
	if err != nil {
		return nil, wrap(name, err)
	}
	sq, err := gorgonia.Square(b.learnables[0]) // fc1.W
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
