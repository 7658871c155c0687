package testmodels

import (
	"math"
	"math/rand"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// NumClasses is the number of classes every model predicts; the label input
// of every model is a one-hot matrix of shape (batch, NumClasses).
const NumClasses = 4

// Model is a small Gorgonia model built at a fixed (micro)batch size.
//
// The graph contains the forward pass and the scalar cost only; no gradient
// nodes have been added.
type Model struct {
	// Name is the builder name, e.g. "mlp".
	Name string
	// Graph is the expression graph holding the whole model.
	Graph *gorgonia.ExprGraph
	// Cost is the scalar mean cross-entropy cost node.
	Cost *gorgonia.Node
	// Learnables are the trainable parameters in a fixed order, with values
	// initialised deterministically from the builder's seed. Their names are
	// unique within the graph and have the form "<Name>.<layer>.<param>",
	// e.g. "mlp.fc1.W".
	Learnables gorgonia.Nodes
	// Inputs are the data inputs, uniquely named "<Name>.x" (features, first)
	// and "<Name>.y" (one-hot labels of shape (batch, NumClasses), last).
	// They carry no value until bound with gorgonia.Let.
	Inputs gorgonia.Nodes

	// BatchSize is the (micro)batch size the graph was built for.
	BatchSize int
	// Dtype is the element type of every tensor in the model.
	Dtype tensor.Dtype
	// BatchNorms lists the stateful gorgonia BatchNorm ops used by the model
	// (empty for models without batch normalisation). Their backward pass
	// reads batch statistics saved by the most recent forward execution, so
	// a forward and its backward must not be interleaved with another
	// forward of the same op.
	BatchNorms []*gorgonia.BatchNormOp

	// oneHot[i] reports whether Inputs[i] holds one-hot labels.
	oneHot []bool
}

// Builder builds a fresh model with element type dt (tensor.Float64 or
// tensor.Float32) at the given batch size, initialising its learnables
// deterministically from seed.
type Builder func(dt tensor.Dtype, batch int, seed int64) (*Model, error)

// NamedBuilder pairs a Builder with the name of the model it builds.
type NamedBuilder struct {
	// Name is the model name, equal to Model.Name of the built models.
	Name string
	// Build builds the model.
	Build Builder
}

// All returns every model builder, in a fixed order.
func All() []NamedBuilder {
	return []NamedBuilder{
		{Name: "mlp", Build: MLP},
		{Name: "cnn", Build: CNN},
		{Name: "resnet", Build: ResNet},
		{Name: "attention", Build: Attention},
	}
}

// SharedWeights returns the builders of the models that read a learnable in
// several places far apart, in a fixed order: tied input and output
// embeddings, a recurrence whose gate weights are applied at every time step,
// and an L2 weight penalty in the cost. A split puts such a learnable in
// several stages. They are not in All: the engine (asyncvm) does not yet
// train plans whose stages share a learnable.
func SharedWeights() []NamedBuilder {
	return []NamedBuilder{
		{Name: "tied", Build: Tied},
		{Name: "gru", Build: GRU},
		{Name: "penalty", Build: Penalty},
	}
}

// ByName returns the builder registered under name in All or SharedWeights.
func ByName(name string) (Builder, bool) {
	for _, nb := range append(All(), SharedWeights()...) {
		if nb.Name == name {
			return nb.Build, true
		}
	}
	return nil, false
}

// Batch returns deterministic random data for m.Inputs, in the same order,
// drawn from rng: feature inputs are filled with N(0,1) samples (row-major)
// and label inputs get one-hot rows with a uniformly drawn class. The inputs
// are generated in order, so the same rng state always yields the same
// batch.
func (m *Model) Batch(rng *rand.Rand) []gorgonia.Value {
	vals := make([]gorgonia.Value, len(m.Inputs))
	for i, in := range m.Inputs {
		shape := in.Shape().Clone()
		size := shape.TotalSize()
		data := make([]float64, size)
		if i < len(m.oneHot) && m.oneHot[i] {
			cols := shape[len(shape)-1]
			for r := 0; r < size/cols; r++ {
				data[r*cols+rng.Intn(cols)] = 1
			}
		} else {
			for j := range data {
				data[j] = rng.NormFloat64()
			}
		}
		vals[i] = newDense(in.Dtype(), shape, data)
	}
	return vals
}

// newDense returns a dense tensor of dtype dt and the given shape holding
// data (converted to float32 when dt is tensor.Float32).
func newDense(dt tensor.Dtype, shape tensor.Shape, data []float64) *tensor.Dense {
	switch dt {
	case tensor.Float32:
		f32 := make([]float32, len(data))
		for i, v := range data {
			f32[i] = float32(v)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f32))
	default:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
}

// builder accumulates the pieces of a Model while its graph is built.
type builder struct {
	name       string
	g          *gorgonia.ExprGraph
	dt         tensor.Dtype
	batch      int
	rng        *rand.Rand
	learnables gorgonia.Nodes
	inputs     gorgonia.Nodes
	oneHot     []bool
	bns        []*gorgonia.BatchNormOp
}

func newBuilder(name string, dt tensor.Dtype, batch int, seed int64) (*builder, error) {
	if dt != tensor.Float64 && dt != tensor.Float32 {
		return nil, errors.Errorf("testmodels: %s: unsupported dtype %v (want Float64 or Float32)", name, dt)
	}
	if batch < 2 {
		// BatchNorm needs at least two samples for its unbiased running
		// variance; keep the rule uniform across models.
		return nil, errors.Errorf("testmodels: %s: batch size must be at least 2, got %d", name, batch)
	}
	return &builder{
		name:  name,
		g:     gorgonia.NewGraph(),
		dt:    dt,
		batch: batch,
		rng:   rand.New(rand.NewSource(seed)),
	}, nil
}

// qualify prefixes a local node name with the model name.
func (b *builder) qualify(name string) string { return b.name + "." + name }

// input adds a data input of the given shape.
func (b *builder) input(name string, oneHot bool, shape ...int) *gorgonia.Node {
	n := gorgonia.NewTensor(b.g, b.dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(b.qualify(name)))
	b.inputs = append(b.inputs, n)
	b.oneHot = append(b.oneHot, oneHot)
	return n
}

// param adds a learnable of the given shape whose entries are drawn, in
// row-major order, from draw.
func (b *builder) param(name string, draw func() float64, shape ...int) *gorgonia.Node {
	s := tensor.Shape(shape)
	data := make([]float64, s.TotalSize())
	for i := range data {
		data[i] = draw()
	}
	v := newDense(b.dt, s.Clone(), data)
	n := gorgonia.NewTensor(b.g, b.dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(b.qualify(name)), gorgonia.WithValue(v))
	b.learnables = append(b.learnables, n)
	return n
}

// uniform returns a draw function for U(lo, hi) using the builder's rng.
func (b *builder) uniform(lo, hi float64) func() float64 {
	return func() float64 { return lo + (hi-lo)*b.rng.Float64() }
}

// glorot adds a learnable initialised with Glorot (Xavier) uniform values
// for the given fan-in and fan-out.
func (b *builder) glorot(name string, fanIn, fanOut int, shape ...int) *gorgonia.Node {
	limit := math.Sqrt(6 / float64(fanIn+fanOut))
	return b.param(name, b.uniform(-limit, limit), shape...)
}

// scalar returns a constant scalar of the builder's dtype.
func (b *builder) scalar(v float64) *gorgonia.Node {
	if b.dt == tensor.Float32 {
		return gorgonia.NewConstant(float32(v))
	}
	return gorgonia.NewConstant(v)
}

// linear applies a fully connected layer x·W + b to x of shape (n, in),
// with W of shape (in, out) and b of shape (1, out).
func (b *builder) linear(name string, x *gorgonia.Node, in, out int) (*gorgonia.Node, error) {
	w := b.glorot(name+".W", in, out, in, out)
	bias := b.param(name+".b", b.uniform(-0.1, 0.1), 1, out)
	xw, err := gorgonia.Mul(x, w)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: matmul", name)
	}
	y, err := gorgonia.BroadcastAdd(xw, bias, nil, []byte{0})
	if err != nil {
		return nil, errors.Wrapf(err, "%s: bias", name)
	}
	return y, nil
}

// conv adds a 3×3, stride 1, padding 1 convolution (no bias) from inC to
// outC channels applied to x of shape (batch, inC, H, W).
func (b *builder) conv(name string, x *gorgonia.Node, inC, outC int) (*gorgonia.Node, error) {
	const k = 3
	w := b.glorot(name+".W", inC*k*k, outC*k*k, outC, inC, k, k)
	y, err := gorgonia.Conv2d(x, w, tensor.Shape{k, k}, []int{1, 1}, []int{1, 1}, []int{1, 1})
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	return y, nil
}

// batchNorm adds gorgonia.BatchNorm over the channels of x (batch, C, H, W)
// with explicitly created per-channel scale and bias learnables of shape
// (1, C, 1, 1).
func (b *builder) batchNorm(name string, x *gorgonia.Node) (*gorgonia.Node, error) {
	c := x.Shape()[1]
	scale := b.param(name+".scale", b.uniform(0.8, 1.2), 1, c, 1, 1)
	bias := b.param(name+".bias", b.uniform(-0.1, 0.1), 1, c, 1, 1)
	y, _, _, op, err := gorgonia.BatchNorm(x, scale, bias, 0.9, 1e-5)
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	b.bns = append(b.bns, op)
	return y, nil
}

// crossEntropy returns the mean cross-entropy between the rows of logits
// (batch, NumClasses) and the one-hot labels y:
// -mean_i sum_j y_ij log softmax(logits)_ij.
func (b *builder) crossEntropy(logits, y *gorgonia.Node) (*gorgonia.Node, error) {
	logp, err := gorgonia.LogSoftMax(logits, 1)
	if err != nil {
		return nil, errors.Wrap(err, "log-softmax")
	}
	picked, err := gorgonia.HadamardProd(y, logp)
	if err != nil {
		return nil, errors.Wrap(err, "select labels")
	}
	perSample, err := gorgonia.Sum(picked, 1)
	if err != nil {
		return nil, errors.Wrap(err, "sum classes")
	}
	mean, err := gorgonia.Mean(perSample)
	if err != nil {
		return nil, errors.Wrap(err, "mean")
	}
	cost, err := gorgonia.Neg(mean)
	if err != nil {
		return nil, errors.Wrap(err, "neg")
	}
	return cost, nil
}

// model assembles the Model once cost has been built.
func (b *builder) model(cost *gorgonia.Node) *Model {
	return &Model{
		Name:       b.name,
		Graph:      b.g,
		Cost:       cost,
		Learnables: b.learnables,
		Inputs:     b.inputs,
		BatchSize:  b.batch,
		Dtype:      b.dt,
		BatchNorms: b.bns,
		oneHot:     b.oneHot,
	}
}

// wrap annotates a model construction error with the model name.
func wrap(name string, err error) error {
	return errors.Wrapf(err, "testmodels: %s", name)
}
