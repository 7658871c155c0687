package graphsplit

import (
	"math/rand"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// randomModel builds a random differentiable graph from the ops the splitter
// supports, driven by the bytes of a fuzz input: linear layers, broadcast bias
// adds, pointwise nonlinearities, skip connections from any earlier
// activation of the same shape, Hadamard products, concatenations, softmax,
// and a mean at the end. Learnables are sometimes read again far from their
// first reader: an earlier weight, bias or gate applied again, a weight
// applied transposed (tied), an L2 penalty on a learnable added to the cost.
// It returns the graph, cost, learnables, data inputs and their values.
type randomModel struct {
	g          *G.ExprGraph
	cost       *G.Node
	learnables G.Nodes
	feeds      map[*G.Node]G.Value
}

type byteStream struct {
	b []byte
	i int
}

func (s *byteStream) next() int {
	if s.i >= len(s.b) {
		return 0
	}
	v := int(s.b[s.i])
	s.i++
	return v
}

// randomBatch is the batch size of buildRandom's models.
const randomBatch = 3

// randomBuilder is the state of buildRandom: the fuzz input's bytes that
// drive the choices, the generator of the values, the model so far and
// its activations.
type randomBuilder struct {
	s   *byteStream
	rng *rand.Rand // draws the values of the data input and learnables
	dt  tensor.Dtype
	m   *randomModel
	// acts are the activations so far, the data input first; cur is the
	// last one.
	acts G.Nodes
	cur  *G.Node
	// nparam counts the learnables made, for their names.
	nparam int
	// penalties are the L2 penalties to add to the cost.
	penalties G.Nodes
}

func buildRandom(data []byte, dt tensor.Dtype) (*randomModel, error) {
	b := newRandomBuilder(data, dt)
	layers := 1 + b.s.next()%8
	for l := 0; l < layers; l++ {
		op := b.s.next() % 16
		if err := b.layer(op); err != nil {
			return nil, errors.Wrapf(err, "layer %d op %d", l, op)
		}
		b.acts = append(b.acts, b.cur)
	}
	return b.finish()
}

// newRandomBuilder seeds the generator with the input's length and first
// byte, and makes the data input x, (randomBatch, 2 + the next byte % 4),
// with random values.
func newRandomBuilder(data []byte, dt tensor.Dtype) *randomBuilder {
	s := &byteStream{b: data}
	rng := rand.New(rand.NewSource(int64(len(data))*7919 + int64(s.next())))
	g := G.NewGraph()
	b := &randomBuilder{s: s, rng: rng, dt: dt, m: &randomModel{g: g, feeds: map[*G.Node]G.Value{}}}
	width := 2 + s.next()%4
	x := G.NewMatrix(g, dt, G.WithShape(randomBatch, width), G.WithName("x"))
	b.m.feeds[x] = tensor.New(tensor.WithShape(randomBatch, width), tensor.WithBacking(b.values(randomBatch*width)))
	b.acts = G.Nodes{x}
	b.cur = x
	return b
}

// values draws n normal values of standard deviation 0.5, as a slice of
// the builder's dtype.
func (b *randomBuilder) values(n int) interface{} {
	if b.dt == tensor.Float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(b.rng.NormFloat64() * 0.5)
		}
		return v
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = b.rng.NormFloat64() * 0.5
	}
	return v
}

// param makes a learnable of the shape with random values and adds it to
// the model's learnables.
func (b *randomBuilder) param(shape ...int) *G.Node {
	b.nparam++
	n := G.NewTensor(b.m.g, b.dt, len(shape), G.WithShape(shape...), G.WithName(fmtName("p", b.nparam)),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b.values(tensor.Shape(shape).TotalSize())))))
	b.m.learnables = append(b.m.learnables, n)
	return n
}

// reuse picks, with the next byte, one of the earlier learnables that fit
// (nil if none does, and then it reads no byte).
func (b *randomBuilder) reuse(fits func(shape tensor.Shape) bool) *G.Node {
	var cands G.Nodes
	for _, p := range b.m.learnables {
		if fits(p.Shape()) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[b.s.next()%len(cands)]
}

// scalar is a constant v of the builder's dtype.
func (b *randomBuilder) scalar(v float64) *G.Node {
	if b.dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// layer applies op (0–15) to cur, setting cur to the result; ops 13–15
// read earlier learnables again (reread). Some ops leave cur as it is
// when they do not apply.
func (b *randomBuilder) layer(op int) (err error) {
	cur, w := b.cur, b.cur.Shape()[1]
	switch op {
	case 0, 1: // linear
		out := 2 + b.s.next()%5
		cur, err = G.Mul(cur, b.param(w, out))
	case 2: // bias
		cur, err = G.BroadcastAdd(cur, b.param(1, w), nil, []byte{0})
	case 3:
		cur, err = G.Tanh(cur)
	case 4:
		cur, err = G.Sigmoid(cur)
	case 5: // skip from an earlier activation of the same shape
		for i := len(b.acts) - 1; i >= 0; i-- {
			if b.acts[i] != cur && b.acts[i].Shape().Eq(cur.Shape()) {
				cur, err = G.Add(cur, b.acts[i])
				break
			}
		}
	case 6: // gate with a learnable
		cur, err = G.HadamardProd(cur, b.param(randomBatch, w))
	case 7: // concat with an earlier activation
		other := b.acts[b.s.next()%len(b.acts)]
		cur, err = G.Concat(1, cur, other)
	case 8:
		cur, err = G.SoftMax(cur)
	case 9:
		cur, err = G.Rectify(cur)
	case 10: // keep the first columns, at least two: gorgonia's reductions
		// give wrong results on tensors with a trailing unit dimension
		// (a softmax over one column has a gradient of exactly zero, and
		// gorgonia computes another value whether split or not)
		if w > 2 {
			k := 2 + b.s.next()%(w-2)
			cur, err = G.Slice(cur, nil, G.S(0, k))
		}
	case 11: // flatten and back
		var flat *G.Node
		if flat, err = G.Reshape(cur, tensor.Shape{randomBatch * w}); err == nil {
			cur, err = G.Reshape(flat, tensor.Shape{randomBatch, w})
		}
	case 12: // transpose, scale by a learnable, transpose back
		var tr *G.Node
		if tr, err = G.Transpose(cur); err == nil {
			if tr, err = G.HadamardProd(tr, b.param(w, randomBatch)); err == nil {
				cur, err = G.Transpose(tr)
			}
		}
	default:
		return b.reread(op)
	}
	b.cur = cur
	return err
}

// reread applies op 13–15, which reads an earlier learnable again, to cur:
// 13 applies an earlier weight, bias or gate again, 14 an earlier weight
// transposed (as a tied embedding is), and 15 adds an L2 penalty on an
// earlier learnable to the penalties. Without a learnable that fits it
// does nothing.
func (b *randomBuilder) reread(op int) (err error) {
	cur, w := b.cur, b.cur.Shape()[1]
	switch op {
	case 13: // an earlier weight, bias or gate, applied again
		p := b.reuse(func(sh tensor.Shape) bool {
			return sh[0] == w || sh.Eq(tensor.Shape{1, w}) || sh.Eq(tensor.Shape{randomBatch, w})
		})
		switch {
		case p == nil:
		case p.Shape().Eq(tensor.Shape{1, w}):
			cur, err = G.BroadcastAdd(cur, p, nil, []byte{0})
		case p.Shape().Eq(tensor.Shape{randomBatch, w}):
			cur, err = G.HadamardProd(cur, p)
		default:
			cur, err = G.Mul(cur, p)
		}
	case 14: // an earlier weight applied transposed, as a tied embedding is
		if p := b.reuse(func(sh tensor.Shape) bool { return len(sh) == 2 && sh[1] == w && sh[0] > 1 }); p != nil {
			var tr *G.Node
			if tr, err = G.Transpose(p); err == nil {
				cur, err = G.Mul(cur, tr)
			}
		}
	case 15: // an L2 penalty on an earlier learnable, added to the cost
		if p := b.reuse(func(tensor.Shape) bool { return true }); p != nil {
			var pen *G.Node
			if pen, err = G.Square(p); err == nil {
				if pen, err = G.Sum(pen); err == nil {
					pen, err = G.Mul(b.scalar(0.1), pen)
					b.penalties = append(b.penalties, pen)
				}
			}
		}
	}
	b.cur = cur
	return err
}

// finish gives the model a learnable if it has none (a last linear layer
// to 2 columns), and sets its cost: the mean of cur's squares plus the
// penalties, in order.
func (b *randomBuilder) finish() (*randomModel, error) {
	m, cur := b.m, b.cur
	var err error
	if len(m.learnables) == 0 {
		cur, err = G.Mul(cur, b.param(cur.Shape()[1], 2))
		if err != nil {
			return nil, err
		}
	}
	sq, err := G.Square(cur)
	if err != nil {
		return nil, err
	}
	if m.cost, err = G.Mean(sq); err != nil {
		return nil, err
	}
	for _, pen := range b.penalties {
		if m.cost, err = G.Add(m.cost, pen); err != nil {
			return nil, err
		}
	}
	// Learnables the cost cannot reach (possible only through dead ends)
	// would be rejected by Split; every learnable here feeds cur.
	return m, nil
}

func fmtName(prefix string, i int) string {
	return prefix + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
}
