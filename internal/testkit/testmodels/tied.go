package testmodels

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Tied builds a bigram language model whose output projection is its input
// embedding, transposed (tied embeddings, as language models use them):
//
//	x (batch, NumClasses), one-hot tokens
//	→ e = x·E, E (NumClasses, 16) the embedding
//	→ fc1 16→16, Tanh
//	→ fc2 16→16, Tanh
//	→ logits = h·Eᵀ + out.b
//	→ log-softmax cross-entropy against the next token y (batch, NumClasses).
//
// E is read by the first op and by the last layer. Learnables (6): E,
// fc1.W, fc1.b, fc2.W, fc2.b, out.b.
func Tied(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name, d = "tied", 16
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", true, batch, NumClasses)
	y := b.input("y", true, batch, NumClasses)
	emb := b.glorot("E", NumClasses, d, NumClasses, d)

	h, err := gorgonia.Mul(x, emb)
	if err != nil {
		return nil, wrap(name, err)
	}
	for _, layer := range []string{"fc1", "fc2"} {
		if h, err = b.linear(layer, h, d, d); err != nil {
			return nil, wrap(name, err)
		}
		if h, err = gorgonia.Tanh(h); err != nil {
			return nil, wrap(name, err)
		}
	}
	embT, err := gorgonia.Transpose(emb)
	if err != nil {
		return nil, wrap(name, err)
	}
	logits, err := gorgonia.Mul(h, embT)
	if err != nil {
		return nil, wrap(name, err)
	}
	bias := b.param("out.b", b.uniform(-0.1, 0.1), 1, NumClasses)
	if logits, err = gorgonia.BroadcastAdd(logits, bias, nil, []byte{0}); err != nil {
		return nil, wrap(name, err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}
