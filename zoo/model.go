package zoo

import (
	"math"
	"math/rand"

	"github.com/pkg/errors"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Model is a classifier built with plain Gorgonia at a fixed microbatch
// size: what a user hands to the library.
type Model struct {
	Name  string
	Graph *gorgonia.ExprGraph
	// X is the images input (Batch, …), Y the one-hot labels (Batch,
	// Classes).
	X, Y *gorgonia.Node
	// Cost is the mean cross-entropy; Logits the predictions (Batch,
	// Classes).
	Cost, Logits *gorgonia.Node
	Learnables   gorgonia.Nodes
	Batch        int
	// BatchNorms are the model's stateful BatchNorm ops (evaluation puts
	// them in inference mode).
	BatchNorms []*gorgonia.BatchNormOp
}

// Builder builds a fresh model at microbatch size batch with learnables
// drawn from seed.
type Builder func(batch int, seed int64) (*Model, error)

// init draws deterministic initial values.
type initializer struct{ rng *rand.Rand }

// glorot is a Glorot-uniform tensor for a layer with the given fans.
func (in initializer) glorot(fanIn, fanOut int, shape ...int) *tensor.Dense {
	limit := math.Sqrt(6 / float64(fanIn+fanOut))
	d := make([]float32, tensor.Shape(shape).TotalSize())
	for i := range d {
		d[i] = float32((in.rng.Float64()*2 - 1) * limit)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

func constant(v float32, shape ...int) *tensor.Dense {
	d := make([]float32, tensor.Shape(shape).TotalSize())
	for i := range d {
		d[i] = v
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

// param adds a named learnable with a value.
func param(g *gorgonia.ExprGraph, name string, v *tensor.Dense) *gorgonia.Node {
	return gorgonia.NewTensor(g, tensor.Float32, v.Dims(), gorgonia.WithShape(v.Shape()...), gorgonia.WithName(name), gorgonia.WithValue(v))
}

// linear is x·W + b with W (in, out) and b (1, out).
func linear(g *gorgonia.ExprGraph, in initializer, name string, x *gorgonia.Node, nIn, nOut int, learn *gorgonia.Nodes) (*gorgonia.Node, error) {
	w := param(g, name+".W", in.glorot(nIn, nOut, nIn, nOut))
	b := param(g, name+".b", constant(0, 1, nOut))
	*learn = append(*learn, w, b)
	xw, err := gorgonia.Mul(x, w)
	if err != nil {
		return nil, errors.Wrapf(err, "%s", name)
	}
	return gorgonia.BroadcastAdd(xw, b, nil, []byte{0})
}

// crossEntropy is the mean over the batch of −Σ y·log softmax(logits).
func crossEntropy(logits, y *gorgonia.Node) (*gorgonia.Node, error) {
	logp, err := gorgonia.LogSoftMax(logits, 1)
	if err != nil {
		return nil, err
	}
	yl, err := gorgonia.HadamardProd(y, logp)
	if err != nil {
		return nil, err
	}
	s, err := gorgonia.Sum(yl, 1)
	if err != nil {
		return nil, err
	}
	m, err := gorgonia.Mean(s)
	if err != nil {
		return nil, err
	}
	return gorgonia.Neg(m)
}
