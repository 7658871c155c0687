package testmodels

import (
	"math"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Attention builds a single-head self-attention block with a classifier
// head. With B = batch, T = 4 tokens, D = 8 features and H = 8 hidden units:
//
//	x (B, T, D), reshaped to (B·T, D)
//	→ Q, K, V = x·Wq, x·Wk, x·Wv (each reshaped back to (B, T, D))
//	→ scores = BatchedMatMul(Q, Kᵀ) / √D (B, T, T)     (Kᵀ via the transB flag)
//	→ P = SoftMax(scores) over the last axis
//	→ A = BatchedMatMul(P, V) (B, T, D)
//	→ r = x + A (residual, added in (B, T, D), then reshaped to (B·T, D))
//	→ LayerNorm over D built from primitives:
//	    μ = Mean(r), c = r − μ, σ² = Mean(c²), n = c / Sqrt(σ² + ε),
//	    ln = n ⊙ gain + bias
//	→ feed-forward ff D→H, Tanh (B·T, H)
//	→ mean pooling over T (B, H)
//	→ head H→NumClasses
//	→ log-softmax cross-entropy against y (B, NumClasses).
//
// Learnables (9): Wq, Wk, Wv (D, D), ln.gain, ln.bias (1, D), ff.W, ff.b,
// head.W, head.b.
func Attention(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const (
		name = "attention"
		T    = 4
		D    = 8
		H    = 8
		eps  = 1e-5
	)
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, T, D)
	y := b.input("y", true, batch, NumClasses)

	fail := func(what string, err error) (*Model, error) {
		return nil, wrap(name, errors.Wrap(err, what))
	}

	x2, err := gorgonia.Reshape(x, tensor.Shape{batch * T, D})
	if err != nil {
		return fail("flatten x", err)
	}

	// Q, K, V projections.
	proj := func(p string) (*gorgonia.Node, error) {
		w := b.glorot(p, D, D, D, D)
		z, err := gorgonia.Mul(x2, w)
		if err != nil {
			return nil, err
		}
		return gorgonia.Reshape(z, tensor.Shape{batch, T, D})
	}
	q, err := proj("Wq")
	if err != nil {
		return fail("query", err)
	}
	k, err := proj("Wk")
	if err != nil {
		return fail("key", err)
	}
	v, err := proj("Wv")
	if err != nil {
		return fail("value", err)
	}

	// Scaled dot-product attention.
	scores, err := gorgonia.BatchedMatMul(q, k, false, true)
	if err != nil {
		return fail("scores", err)
	}
	if scores, err = gorgonia.HadamardDiv(scores, b.scalar(math.Sqrt(D))); err != nil {
		return fail("scale", err)
	}
	probs, err := gorgonia.SoftMax(scores, 2)
	if err != nil {
		return fail("softmax", err)
	}
	attn, err := gorgonia.BatchedMatMul(probs, v)
	if err != nil {
		return fail("attend", err)
	}
	// The residual is added in (B, T, D) to the input node itself, not to
	// its Reshape x2: in a forward-only TapeMachine program Gorgonia would
	// run Add in place on x2, whose value aliases the caller's x tensor.
	r, err := gorgonia.Add(x, attn)
	if err != nil {
		return fail("residual", err)
	}
	if r, err = gorgonia.Reshape(r, tensor.Shape{batch * T, D}); err != nil {
		return fail("flatten residual", err)
	}

	// Layer norm over the feature axis.
	ln, err := layerNorm(b, "ln", r, eps)
	if err != nil {
		return fail("layer norm", err)
	}

	// Feed-forward layer, then mean pooling over the tokens.
	ff, err := b.linear("ff", ln, D, H)
	if err != nil {
		return fail("feed-forward", err)
	}
	if ff, err = gorgonia.Tanh(ff); err != nil {
		return fail("feed-forward", err)
	}
	if ff, err = gorgonia.Reshape(ff, tensor.Shape{batch, T, H}); err != nil {
		return fail("unflatten", err)
	}
	pooled, err := gorgonia.Mean(ff, 1)
	if err != nil {
		return fail("pool", err)
	}

	logits, err := b.linear("head", pooled, H, NumClasses)
	if err != nil {
		return fail("head", err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return fail("cost", err)
	}
	return b.model(cost), nil
}

// layerNorm normalises every row of x (n, d) to zero mean and unit variance
// and applies a learnable (1, d) gain and bias, using only primitive ops.
func layerNorm(b *builder, name string, x *gorgonia.Node, eps float64) (*gorgonia.Node, error) {
	n, d := x.Shape()[0], x.Shape()[1]
	gain := b.param(name+".gain", b.uniform(0.8, 1.2), 1, d)
	bias := b.param(name+".bias", b.uniform(-0.1, 0.1), 1, d)

	mu, err := gorgonia.Mean(x, 1)
	if err != nil {
		return nil, errors.Wrap(err, "mean")
	}
	if mu, err = gorgonia.Reshape(mu, tensor.Shape{n, 1}); err != nil {
		return nil, errors.Wrap(err, "mean")
	}
	centered, err := gorgonia.BroadcastSub(x, mu, nil, []byte{1})
	if err != nil {
		return nil, errors.Wrap(err, "center")
	}
	sq, err := gorgonia.Square(centered)
	if err != nil {
		return nil, errors.Wrap(err, "square")
	}
	variance, err := gorgonia.Mean(sq, 1)
	if err != nil {
		return nil, errors.Wrap(err, "variance")
	}
	if variance, err = gorgonia.Add(variance, b.scalar(eps)); err != nil {
		return nil, errors.Wrap(err, "epsilon")
	}
	std, err := gorgonia.Sqrt(variance)
	if err != nil {
		return nil, errors.Wrap(err, "sqrt")
	}
	if std, err = gorgonia.Reshape(std, tensor.Shape{n, 1}); err != nil {
		return nil, errors.Wrap(err, "std")
	}
	normed, err := gorgonia.BroadcastHadamardDiv(centered, std, nil, []byte{1})
	if err != nil {
		return nil, errors.Wrap(err, "normalise")
	}
	scaled, err := gorgonia.BroadcastHadamardProd(normed, gain, nil, []byte{0})
	if err != nil {
		return nil, errors.Wrap(err, "gain")
	}
	out, err := gorgonia.BroadcastAdd(scaled, bias, nil, []byte{0})
	if err != nil {
		return nil, errors.Wrap(err, "bias")
	}
	return out, nil
}
