package zoo

import (
	"fmt"
	"math/rand"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MLP is a multilayer perceptron on flattened 28×28 images: 784 → 256 →
// 128 → 10 with ReLU, float32.
func MLP(batch int, seed int64) (*Model, error) {
	g := gorgonia.NewGraph()
	in := initializer{rand.New(rand.NewSource(seed))}
	m := &Model{Name: "mlp", Graph: g, Batch: batch}
	m.X = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(batch, 784), gorgonia.WithName("x"))
	m.Y = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(batch, 10), gorgonia.WithName("y"))
	h := m.X
	sizes := []int{784, 256, 128, 10}
	for l := 0; l+1 < len(sizes); l++ {
		var err error
		if h, err = linear(g, in, fmt.Sprintf("fc%d", l+1), h, sizes[l], sizes[l+1], &m.Learnables); err != nil {
			return nil, err
		}
		if l+2 < len(sizes) {
			if h, err = gorgonia.Rectify(h); err != nil {
				return nil, err
			}
		}
	}
	m.Logits = h
	var err error
	if m.Cost, err = crossEntropy(h, m.Y); err != nil {
		return nil, err
	}
	return m, nil
}
