package testmodels

import (
	"math"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Attention sizes: tokens, features per token, hidden units, and layer
// norm's ε.
const (
	attnTokens   = 4
	attnFeatures = 8
	attnHidden   = 8
	attnEps      = 1e-5
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
	const name = "attention"
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, attnTokens, attnFeatures)
	y := b.input("y", true, batch, NumClasses)

	fail := func(what string, err error) (*Model, error) {
		return nil, wrap(name, errors.Wrap(err, what))
	}

	x2, err := gorgonia.Reshape(x, tensor.Shape{batch * attnTokens, attnFeatures})
	if err != nil {
		return fail("flatten x", err)
	}
	q, k, v, err := projectQKV(b, x2, batch)
	if err != nil {
		return nil, wrap(name, err)
	}
	r, err := attendResidual(b, x, q, k, v, batch)
	if err != nil {
		return nil, wrap(name, err)
	}

	// Layer norm over the feature axis.
	ln, err := layerNorm(b, "ln", r, attnEps)
	if err != nil {
		return fail("layer norm", err)
	}
	pooled, err := feedForwardPool(b, ln, batch)
	if err != nil {
		return nil, wrap(name, err)
	}

	logits, err := b.linear("head", pooled, attnHidden, NumClasses)
	if err != nil {
		return fail("head", err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return fail("cost", err)
	}
	return b.model(cost), nil
}

// projectQKV applies the Q, K and V projections (learnables Wq, Wk, Wv,
// drawn in that order) to x2 (B·T, D) and returns each reshaped to
// (B, T, D). Its error is wrapped with "query", "key" or "value".
func projectQKV(b *builder, x2 *gorgonia.Node, batch int) (q, k, v *gorgonia.Node, err error) {
	proj := func(p string) (*gorgonia.Node, error) {
		w := b.glorot(p, attnFeatures, attnFeatures, attnFeatures, attnFeatures)
		z, err := gorgonia.Mul(x2, w)
		if err != nil {
			return nil, err
		}
		return gorgonia.Reshape(z, tensor.Shape{batch, attnTokens, attnFeatures})
	}
	if q, err = proj("Wq"); err != nil {
		return nil, nil, nil, errors.Wrap(err, "query")
	}
	if k, err = proj("Wk"); err != nil {
		return nil, nil, nil, errors.Wrap(err, "key")
	}
	if v, err = proj("Wv"); err != nil {
		return nil, nil, nil, errors.Wrap(err, "value")
	}
	return q, k, v, nil
}

// attendResidual is scaled dot-product attention of q, k, v (B, T, D)
// added to the input x: it returns x + SoftMax(q·kᵀ/√D)·v flattened to
// (B·T, D). Its error is wrapped with the step that failed ("scores",
// "scale", "softmax", "attend", "residual", "flatten residual").
func attendResidual(b *builder, x, q, k, v *gorgonia.Node, batch int) (*gorgonia.Node, error) {
	scores, err := gorgonia.BatchedMatMul(q, k, false, true)
	if err != nil {
		return nil, errors.Wrap(err, "scores")
	}
	if scores, err = gorgonia.HadamardDiv(scores, b.scalar(math.Sqrt(attnFeatures))); err != nil {
		return nil, errors.Wrap(err, "scale")
	}
	probs, err := gorgonia.SoftMax(scores, 2)
	if err != nil {
		return nil, errors.Wrap(err, "softmax")
	}
	attn, err := gorgonia.BatchedMatMul(probs, v)
	if err != nil {
		return nil, errors.Wrap(err, "attend")
	}
	// The residual is added in (B, T, D) to the input node itself, not to
	// its Reshape x2: in a forward-only TapeMachine program Gorgonia would
	// run Add in place on x2, whose value aliases the caller's x tensor.
	r, err := gorgonia.Add(x, attn)
	if err != nil {
		return nil, errors.Wrap(err, "residual")
	}
	if r, err = gorgonia.Reshape(r, tensor.Shape{batch * attnTokens, attnFeatures}); err != nil {
		return nil, errors.Wrap(err, "flatten residual")
	}
	return r, nil
}

// feedForwardPool is the feed-forward layer ff (D→H, Tanh) on ln
// (B·T, D), then mean pooling over the tokens: it returns (B, H). Its
// error is wrapped with "feed-forward", "unflatten" or "pool".
func feedForwardPool(b *builder, ln *gorgonia.Node, batch int) (*gorgonia.Node, error) {
	ff, err := b.linear("ff", ln, attnFeatures, attnHidden)
	if err != nil {
		return nil, errors.Wrap(err, "feed-forward")
	}
	if ff, err = gorgonia.Tanh(ff); err != nil {
		return nil, errors.Wrap(err, "feed-forward")
	}
	if ff, err = gorgonia.Reshape(ff, tensor.Shape{batch, attnTokens, attnHidden}); err != nil {
		return nil, errors.Wrap(err, "unflatten")
	}
	pooled, err := gorgonia.Mean(ff, 1)
	if err != nil {
		return nil, errors.Wrap(err, "pool")
	}
	return pooled, nil
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
