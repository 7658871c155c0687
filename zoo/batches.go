package zoo

import (
	"math/rand"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Minibatches shuffles d with rng and cuts it into minibatches of
// rows = m.Batch·n examples for model m (the last partial one is dropped),
// as feeds for asyncvm: images shaped like m.X with n times its rows,
// one-hot labels like m.Y.
func (d *Dataset) Minibatches(m *Model, n int, rng *rand.Rand) []map[*gorgonia.Node]gorgonia.Value {
	rows := m.Batch * n
	order := rng.Perm(d.Len())
	var out []map[*gorgonia.Node]gorgonia.Value
	for start := 0; start+rows <= len(order); start += rows {
		x, y := d.tensors(m, order[start:start+rows])
		out = append(out, map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y})
	}
	return out
}

// tensors packs examples idx into an images tensor shaped like m.X (with
// len(idx) rows) and a one-hot labels tensor.
func (d *Dataset) tensors(m *Model, idx []int) (*tensor.Dense, *tensor.Dense) {
	px := d.Pixels()
	xs := make([]float32, len(idx)*px)
	ys := make([]float32, len(idx)*d.Classes)
	for r, i := range idx {
		copy(xs[r*px:], d.Images[i*px:(i+1)*px])
		ys[r*d.Classes+d.Labels[i]] = 1
	}
	shape := m.X.Shape().Clone()
	shape[0] = len(idx)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(xs)),
		tensor.New(tensor.WithShape(len(idx), d.Classes), tensor.WithBacking(ys))
}
