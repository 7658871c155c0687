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

func buildRandom(data []byte, dt tensor.Dtype) (*randomModel, error) {
	s := &byteStream{b: data}
	rng := rand.New(rand.NewSource(int64(len(data))*7919 + int64(s.next())))
	const batch = 3
	g := G.NewGraph()
	m := &randomModel{g: g, feeds: map[*G.Node]G.Value{}}
	values := func(n int) interface{} {
		if dt == tensor.Float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 0.5)
			}
			return v
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.5
		}
		return v
	}
	width := 2 + s.next()%4
	x := G.NewMatrix(g, dt, G.WithShape(batch, width), G.WithName("x"))
	m.feeds[x] = tensor.New(tensor.WithShape(batch, width), tensor.WithBacking(values(batch*width)))
	acts := G.Nodes{x}
	cur := x
	layers := 1 + s.next()%8
	nparam := 0
	param := func(shape ...int) *G.Node {
		nparam++
		n := G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(fmtName("p", nparam)),
			G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(values(tensor.Shape(shape).TotalSize())))))
		m.learnables = append(m.learnables, n)
		return n
	}
	// reuse picks, with the next byte, one of the earlier learnables that
	// fit (nil if none does).
	reuse := func(fits func(shape tensor.Shape) bool) *G.Node {
		var cands G.Nodes
		for _, p := range m.learnables {
			if fits(p.Shape()) {
				cands = append(cands, p)
			}
		}
		if len(cands) == 0 {
			return nil
		}
		return cands[s.next()%len(cands)]
	}
	scalar := func(v float64) *G.Node {
		if dt == tensor.Float32 {
			return G.NewConstant(float32(v))
		}
		return G.NewConstant(v)
	}
	var penalties G.Nodes
	var err error
	for l := 0; l < layers; l++ {
		op := s.next() % 16
		w := cur.Shape()[1]
		switch op {
		case 0, 1: // linear
			out := 2 + s.next()%5
			cur, err = G.Mul(cur, param(w, out))
		case 2: // bias
			cur, err = G.BroadcastAdd(cur, param(1, w), nil, []byte{0})
		case 3:
			cur, err = G.Tanh(cur)
		case 4:
			cur, err = G.Sigmoid(cur)
		case 5: // skip from an earlier activation of the same shape
			for i := len(acts) - 1; i >= 0; i-- {
				if acts[i] != cur && acts[i].Shape().Eq(cur.Shape()) {
					cur, err = G.Add(cur, acts[i])
					break
				}
			}
		case 6: // gate with a learnable
			cur, err = G.HadamardProd(cur, param(batch, w))
		case 7: // concat with an earlier activation
			other := acts[s.next()%len(acts)]
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
				k := 2 + s.next()%(w-2)
				cur, err = G.Slice(cur, nil, G.S(0, k))
			}
		case 11: // flatten and back
			var flat *G.Node
			if flat, err = G.Reshape(cur, tensor.Shape{batch * w}); err == nil {
				cur, err = G.Reshape(flat, tensor.Shape{batch, w})
			}
		case 12: // transpose, scale by a learnable, transpose back
			var tr *G.Node
			if tr, err = G.Transpose(cur); err == nil {
				if tr, err = G.HadamardProd(tr, param(w, batch)); err == nil {
					cur, err = G.Transpose(tr)
				}
			}
		case 13: // an earlier weight, bias or gate, applied again
			p := reuse(func(sh tensor.Shape) bool {
				return sh[0] == w || sh.Eq(tensor.Shape{1, w}) || sh.Eq(tensor.Shape{batch, w})
			})
			switch {
			case p == nil:
			case p.Shape().Eq(tensor.Shape{1, w}):
				cur, err = G.BroadcastAdd(cur, p, nil, []byte{0})
			case p.Shape().Eq(tensor.Shape{batch, w}):
				cur, err = G.HadamardProd(cur, p)
			default:
				cur, err = G.Mul(cur, p)
			}
		case 14: // an earlier weight applied transposed, as a tied embedding is
			if p := reuse(func(sh tensor.Shape) bool { return len(sh) == 2 && sh[1] == w && sh[0] > 1 }); p != nil {
				var tr *G.Node
				if tr, err = G.Transpose(p); err == nil {
					cur, err = G.Mul(cur, tr)
				}
			}
		case 15: // an L2 penalty on an earlier learnable, added to the cost
			if p := reuse(func(tensor.Shape) bool { return true }); p != nil {
				var pen *G.Node
				if pen, err = G.Square(p); err == nil {
					if pen, err = G.Sum(pen); err == nil {
						pen, err = G.Mul(scalar(0.1), pen)
						penalties = append(penalties, pen)
					}
				}
			}
		}
		if err != nil {
			return nil, errors.Wrapf(err, "layer %d op %d", l, op)
		}
		acts = append(acts, cur)
	}
	if len(m.learnables) == 0 {
		cur, err = G.Mul(cur, param(cur.Shape()[1], 2))
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
	for _, pen := range penalties {
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
