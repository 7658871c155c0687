package zoo

import (
	"fmt"
	"math"
	"math/rand"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Transformer sizes: model width, heads, layers, feed-forward width.
const (
	tfWidth  = 32
	tfHeads  = 2
	tfLayers = 2
	tfFF     = 64
)

// Transformer is a decoder-only Transformer for the grapheme→phoneme task
// (G2PData): token embeddings, sinusoidal positional encoding, tfLayers
// blocks of causal multi-head self-attention and a feed-forward layer, each
// with a residual connection and a layer norm built from primitives, and a
// linear read-out to the token vocabulary. Inputs are one-hot tokens
// (batch·G2PLen, G2PVocab); the cost is the mean cross-entropy over the
// target positions. float32.
func Transformer(batch int, seed int64) (*Model, error) { return transformer(batch, seed, false) }

// TiedTransformer is Transformer with tied input and output embeddings, as
// language models are built: the read-out is h·Eᵀ + b with the embedding E
// itself, so the first stage and the last read one learnable (a pipeline
// shares it between them: package stage's owner and replica).
func TiedTransformer(batch int, seed int64) (*Model, error) { return transformer(batch, seed, true) }

func transformer(batch int, seed int64, tied bool) (*Model, error) {
	g := gorgonia.NewGraph()
	in := initializer{rand.New(rand.NewSource(seed))}
	m := &Model{Name: "transformer", Graph: g, Batch: batch}
	if tied {
		m.Name = "transformer-tied"
	}
	rows := batch * G2PLen
	m.X = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(rows, G2PVocab), gorgonia.WithName("tokens"))
	m.Y = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(rows, G2PVocab), gorgonia.WithName("next"))

	emb := param(g, "embed", in.glorot(G2PVocab, tfWidth, G2PVocab, tfWidth))
	m.Learnables = append(m.Learnables, emb)
	h, err := gorgonia.Mul(m.X, emb)
	if err != nil {
		return nil, err
	}
	pos := gorgonia.NewConstant(positions(batch), gorgonia.WithName("positions"))
	if h, err = gorgonia.Add(h, pos); err != nil {
		return nil, err
	}
	mask := gorgonia.NewConstant(causalMask(batch), gorgonia.WithName("causal-mask"))
	for l := 1; l <= tfLayers; l++ {
		if h, err = attentionBlock(g, in, fmt.Sprintf("layer%d", l), h, mask, batch, m); err != nil {
			return nil, err
		}
	}
	if !tied {
		if m.Logits, err = linear(g, in, "readout", h, tfWidth, G2PVocab, &m.Learnables); err != nil {
			return nil, err
		}
	} else {
		et, err := gorgonia.Transpose(emb)
		if err != nil {
			return nil, err
		}
		b := param(g, "readout.b", constant(0, 1, G2PVocab))
		m.Learnables = append(m.Learnables, b)
		hw, err := gorgonia.Mul(h, et)
		if err != nil {
			return nil, err
		}
		if m.Logits, err = gorgonia.BroadcastAdd(hw, b, nil, []byte{0}); err != nil {
			return nil, err
		}
	}
	logp, err := gorgonia.LogSoftMax(m.Logits, 1)
	if err != nil {
		return nil, err
	}
	yl, err := gorgonia.HadamardProd(m.Y, logp)
	if err != nil {
		return nil, err
	}
	total, err := gorgonia.Sum(yl)
	if err != nil {
		return nil, err
	}
	targets, err := gorgonia.Sum(m.Y) // the number of target positions
	if err != nil {
		return nil, err
	}
	if total, err = gorgonia.HadamardDiv(total, targets); err != nil {
		return nil, err
	}
	if m.Cost, err = gorgonia.Neg(total); err != nil {
		return nil, err
	}
	return m, nil
}

// attentionBlock is x + MultiHead(x) → LayerNorm → + FF → LayerNorm on
// rows (batch·G2PLen, tfWidth).
func attentionBlock(g *gorgonia.ExprGraph, in initializer, name string, x, mask *gorgonia.Node, batch int, m *Model) (*gorgonia.Node, error) {
	dh := tfWidth / tfHeads
	heads := make(gorgonia.Nodes, tfHeads)
	for hd := range heads {
		proj := func(kind string) (*gorgonia.Node, error) {
			w := param(g, fmt.Sprintf("%s.head%d.W%s", name, hd, kind), in.glorot(tfWidth, dh, tfWidth, dh))
			m.Learnables = append(m.Learnables, w)
			p, err := gorgonia.Mul(x, w)
			if err != nil {
				return nil, err
			}
			return gorgonia.Reshape(p, tensor.Shape{batch, G2PLen, dh})
		}
		q, err := proj("q")
		if err != nil {
			return nil, err
		}
		k, err := proj("k")
		if err != nil {
			return nil, err
		}
		v, err := proj("v")
		if err != nil {
			return nil, err
		}
		s, err := gorgonia.BatchedMatMul(q, k, false, true)
		if err != nil {
			return nil, err
		}
		scale := gorgonia.NewConstant(float32(1 / math.Sqrt(float64(dh))))
		if s, err = gorgonia.HadamardProd(s, scale); err != nil {
			return nil, err
		}
		if s, err = gorgonia.Add(s, mask); err != nil {
			return nil, err
		}
		if s, err = gorgonia.SoftMax(s, 2); err != nil {
			return nil, err
		}
		if heads[hd], err = gorgonia.BatchedMatMul(s, v); err != nil {
			return nil, err
		}
	}
	cat, err := gorgonia.Concat(2, heads...)
	if err != nil {
		return nil, err
	}
	if cat, err = gorgonia.Reshape(cat, tensor.Shape{batch * G2PLen, tfWidth}); err != nil {
		return nil, err
	}
	att, err := linear(g, in, name+".out", cat, tfWidth, tfWidth, &m.Learnables)
	if err != nil {
		return nil, err
	}
	if x, err = gorgonia.Add(x, att); err != nil {
		return nil, err
	}
	if x, err = layerNorm(g, name+".ln1", x, m); err != nil {
		return nil, err
	}
	ff, err := linear(g, in, name+".ff1", x, tfWidth, tfFF, &m.Learnables)
	if err != nil {
		return nil, err
	}
	if ff, err = gorgonia.Rectify(ff); err != nil {
		return nil, err
	}
	if ff, err = linear(g, in, name+".ff2", ff, tfFF, tfWidth, &m.Learnables); err != nil {
		return nil, err
	}
	if x, err = gorgonia.Add(x, ff); err != nil {
		return nil, err
	}
	return layerNorm(g, name+".ln2", x, m)
}

// layerNorm normalises each row of x (n, d) with a learnable gain and bias,
// from primitives.
func layerNorm(g *gorgonia.ExprGraph, name string, x *gorgonia.Node, m *Model) (*gorgonia.Node, error) {
	n, d := x.Shape()[0], x.Shape()[1]
	gain := param(g, name+".gain", constant(1, 1, d))
	bias := param(g, name+".bias", constant(0, 1, d))
	m.Learnables = append(m.Learnables, gain, bias)
	mu, err := gorgonia.Mean(x, 1)
	if err != nil {
		return nil, err
	}
	if mu, err = gorgonia.Reshape(mu, tensor.Shape{n, 1}); err != nil {
		return nil, err
	}
	centered, err := gorgonia.BroadcastSub(x, mu, nil, []byte{1})
	if err != nil {
		return nil, err
	}
	sq, err := gorgonia.Square(centered)
	if err != nil {
		return nil, err
	}
	variance, err := gorgonia.Mean(sq, 1)
	if err != nil {
		return nil, err
	}
	if variance, err = gorgonia.Add(variance, gorgonia.NewConstant(float32(1e-5))); err != nil {
		return nil, err
	}
	std, err := gorgonia.Sqrt(variance)
	if err != nil {
		return nil, err
	}
	if std, err = gorgonia.Reshape(std, tensor.Shape{n, 1}); err != nil {
		return nil, err
	}
	normed, err := gorgonia.BroadcastHadamardDiv(centered, std, nil, []byte{1})
	if err != nil {
		return nil, err
	}
	scaled, err := gorgonia.BroadcastHadamardProd(normed, gain, nil, []byte{0})
	if err != nil {
		return nil, err
	}
	return gorgonia.BroadcastAdd(scaled, bias, nil, []byte{0})
}

// positions is the sinusoidal positional encoding for every row
// (batch·G2PLen, tfWidth).
func positions(batch int) *tensor.Dense {
	d := make([]float32, batch*G2PLen*tfWidth)
	for b := 0; b < batch; b++ {
		for p := 0; p < G2PLen; p++ {
			for i := 0; i < tfWidth; i += 2 {
				angle := float64(p) / math.Pow(10000, float64(i)/tfWidth)
				row := (b*G2PLen + p) * tfWidth
				d[row+i] = float32(math.Sin(angle))
				d[row+i+1] = float32(math.Cos(angle))
			}
		}
	}
	return tensor.New(tensor.WithShape(batch*G2PLen, tfWidth), tensor.WithBacking(d))
}

// causalMask is −1e9 where a position would attend to a later one
// (batch, G2PLen, G2PLen).
func causalMask(batch int) *tensor.Dense {
	d := make([]float32, batch*G2PLen*G2PLen)
	for b := 0; b < batch; b++ {
		for i := 0; i < G2PLen; i++ {
			for j := i + 1; j < G2PLen; j++ {
				d[(b*G2PLen+i)*G2PLen+j] = -1e9
			}
		}
	}
	return tensor.New(tensor.WithShape(batch, G2PLen, G2PLen), tensor.WithBacking(d))
}
