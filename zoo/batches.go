package zoo

import (
	"math/rand"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Data is a labelled data set as Train and the Evaluator need it.
type Data interface {
	// Len is the number of examples.
	Len() int
	// Batch packs examples idx into values for m.X and m.Y, with len(idx)
	// examples where the model has m.Batch. Rows of y that are all zero
	// are not targets.
	Batch(m *Model, idx []int) (x, y *tensor.Dense)
}

// Minibatches shuffles d with rng and cuts it into minibatches of
// m.Batch·n examples for model m (the last partial one is dropped), as feeds
// for asyncvm.
func Minibatches(d Data, m *Model, n int, rng *rand.Rand) []map[*gorgonia.Node]gorgonia.Value {
	size := m.Batch * n
	order := rng.Perm(d.Len())
	var out []map[*gorgonia.Node]gorgonia.Value
	for start := 0; start+size <= len(order); start += size {
		x, y := d.Batch(m, order[start:start+size])
		out = append(out, map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y})
	}
	return out
}

// Batch packs examples idx into an images tensor shaped like m.X (with
// len(idx) rows) and a one-hot labels tensor.
func (d *Dataset) Batch(m *Model, idx []int) (*tensor.Dense, *tensor.Dense) {
	px := d.Pixels()
	xs := make([]float32, len(idx)*px)
	ys := make([]float32, len(idx)*d.Classes)
	for r, i := range idx {
		for j, b := range d.Images[i*px : (i+1)*px] {
			xs[r*px+j] = float32(b) / 255
		}
		ys[r*d.Classes+d.Labels[i]] = 1
	}
	shape := m.X.Shape().Clone()
	shape[0] = len(idx)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(xs)),
		tensor.New(tensor.WithShape(len(idx), d.Classes), tensor.WithBacking(ys))
}

// FirstMicrobatch is the feeds of m's inputs for the first m.Batch
// examples of d: one microbatch, for timing or checking a model (d must
// hold at least m.Batch examples).
func FirstMicrobatch(d Data, m *Model) map[*gorgonia.Node]gorgonia.Value {
	idx := make([]int, m.Batch)
	for i := range idx {
		idx[i] = i
	}
	x, y := d.Batch(m, idx)
	return map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y}
}
