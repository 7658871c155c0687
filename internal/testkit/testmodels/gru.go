package testmodels

import (
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GRU sizes: time steps, features per step, hidden units.
const (
	gruSteps  = 6
	gruInput  = 4
	gruHidden = 8
)

// GRU builds a gated recurrent unit unrolled over 6 time steps, the same
// gate weights applied at every step, with a classifier on the last state.
// With D = 4 features per step and H = 8 hidden units:
//
//	x (batch, 6·D): step t reads columns [t·D, (t+1)·D)
//	h₀ = 0 (batch, H)
//	for t = 0..5:
//	  [z r] = Sigmoid([x_t h]·gate.W + gate.b)      gate.W (D+H, 2H)
//	  c = Tanh([x_t r⊙h]·cand.W + cand.b)           cand.W (D+H, H)
//	  h = h + z⊙(c − h)
//	→ head H→NumClasses
//	→ log-softmax cross-entropy against y (batch, NumClasses).
//
// ([a b] is Concat along the features.) Learnables (6): gate.W, gate.b,
// cand.W, cand.b, head.W, head.b.
func GRU(dt tensor.Dtype, batch int, seed int64) (*Model, error) {
	const name, D, H = "gru", gruInput, gruHidden
	b, err := newBuilder(name, dt, batch, seed)
	if err != nil {
		return nil, err
	}
	x := b.input("x", false, batch, gruSteps*D)
	y := b.input("y", true, batch, NumClasses)
	gateW := b.glorot("gate.W", D+H, 2*H, D+H, 2*H)
	gateB := b.param("gate.b", b.uniform(-0.1, 0.1), 1, 2*H)
	candW := b.glorot("cand.W", D+H, H, D+H, H)
	candB := b.param("cand.b", b.uniform(-0.1, 0.1), 1, H)
	h := gorgonia.NewConstant(tensor.New(tensor.WithShape(batch, H), tensor.Of(dt)), gorgonia.WithName(b.qualify("h0")))

	affine := func(in, w, bias *gorgonia.Node) (*gorgonia.Node, error) {
		z, err := gorgonia.Mul(in, w)
		if err != nil {
			return nil, err
		}
		return gorgonia.BroadcastAdd(z, bias, nil, []byte{0})
	}
	for t := 0; t < gruSteps; t++ {
		fail := func(what string, err error) (*Model, error) {
			return nil, wrap(name, errors.Wrapf(err, "step %d: %s", t, what))
		}
		xt, err := gorgonia.Slice(x, nil, gorgonia.S(t*D, (t+1)*D))
		if err != nil {
			return fail("input", err)
		}
		in, err := gorgonia.Concat(1, xt, h)
		if err != nil {
			return fail("gate input", err)
		}
		g, err := affine(in, gateW, gateB)
		if err != nil {
			return fail("gates", err)
		}
		if g, err = gorgonia.Sigmoid(g); err != nil {
			return fail("gates", err)
		}
		z, err := gorgonia.Slice(g, nil, gorgonia.S(0, H))
		if err != nil {
			return fail("update gate", err)
		}
		r, err := gorgonia.Slice(g, nil, gorgonia.S(H, 2*H))
		if err != nil {
			return fail("reset gate", err)
		}
		rh, err := gorgonia.HadamardProd(r, h)
		if err != nil {
			return fail("reset", err)
		}
		if in, err = gorgonia.Concat(1, xt, rh); err != nil {
			return fail("candidate input", err)
		}
		c, err := affine(in, candW, candB)
		if err != nil {
			return fail("candidate", err)
		}
		if c, err = gorgonia.Tanh(c); err != nil {
			return fail("candidate", err)
		}
		diff, err := gorgonia.Sub(c, h)
		if err != nil {
			return fail("update", err)
		}
		if diff, err = gorgonia.HadamardProd(z, diff); err != nil {
			return fail("update", err)
		}
		if h, err = gorgonia.Add(h, diff); err != nil {
			return fail("update", err)
		}
	}
	logits, err := b.linear("head", h, H, NumClasses)
	if err != nil {
		return nil, wrap(name, err)
	}
	cost, err := b.crossEntropy(logits, y)
	if err != nil {
		return nil, wrap(name, err)
	}
	return b.model(cost), nil
}
