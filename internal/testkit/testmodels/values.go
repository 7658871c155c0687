package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LearnableValues returns the values currently bound to m.Learnables, in the
// same order. These are the live tensors, not copies: mutating them changes
// the model, and a VM that updates the learnables changes them.
func (m *Model) LearnableValues() []gorgonia.Value {
	vs := make([]gorgonia.Value, len(m.Learnables))
	for i, n := range m.Learnables {
		vs[i] = n.Value()
	}
	return vs
}

// SnapshotValues returns deep copies of vs as tensors. Scalar values become
// 0-dimensional tensors; nil values stay nil.
func SnapshotValues(vs []gorgonia.Value) []tensor.Tensor {
	out := make([]tensor.Tensor, len(vs))
	for i, v := range vs {
		switch t := v.(type) {
		case nil:
		case tensor.Tensor:
			out[i] = t.Clone().(tensor.Tensor)
		default:
			out[i] = tensor.New(tensor.FromScalar(v.Data()))
		}
	}
	return out
}
