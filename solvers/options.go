package solvers

import (
	"math"
	"sort"
	"strings"

	"github.com/pkg/errors"
)

// Option configures a solver, as gorgonia's SolverOpt does; the names and
// defaults are gorgonia's. A constructor refuses an option its solver does
// not take (gorgonia ignores it) and values that are not finite.
type Option func(*hyper)

// hyper is every setting of gorgonia's SGD, Momentum and Adam.
type hyper struct {
	eta, momentum, clip, l1, l2, batch, beta1, beta2, eps float64
	useClip, useL1, useL2                                 bool
	given                                                 map[string]float64
}

func (h *hyper) set(name string, v float64) {
	if h.given == nil {
		h.given = map[string]float64{}
	}
	h.given[name] = v
}

// WithLearnRate sets the learning rate η (default 0.001).
func WithLearnRate(eta float64) Option {
	return func(h *hyper) { h.eta = eta; h.set("WithLearnRate", eta) }
}

// WithMomentum sets Momentum's β (default 0.9).
func WithMomentum(beta float64) Option {
	return func(h *hyper) { h.momentum = beta; h.set("WithMomentum", beta) }
}

// WithL1Reg adds l1·sign(w) to the gradient (Momentum: sign of its
// velocity, as gorgonia does for tensors).
func WithL1Reg(l1 float64) Option {
	return func(h *hyper) { h.l1, h.useL1 = l1, true; h.set("WithL1Reg", l1) }
}

// WithL2Reg adds l2·w to the gradient (Momentum: l2 times its velocity,
// as gorgonia does for tensors).
func WithL2Reg(l2 float64) Option {
	return func(h *hyper) { h.l2, h.useL2 = l2, true; h.set("WithL2Reg", l2) }
}

// WithClip clamps the gradient to [−clip, clip] after regularisation and
// batch scaling (for tensors only when clip > 0, as gorgonia does).
func WithClip(clip float64) Option {
	return func(h *hyper) { h.clip, h.useClip = clip, true; h.set("WithClip", clip) }
}

// WithBatchSize divides the gradient by batch when batch > 1 (default 1).
func WithBatchSize(batch float64) Option {
	return func(h *hyper) { h.batch = batch; h.set("WithBatchSize", batch) }
}

// WithBeta1 sets Adam's decay of the mean (default 0.9).
func WithBeta1(beta1 float64) Option {
	return func(h *hyper) { h.beta1 = beta1; h.set("WithBeta1", beta1) }
}

// WithBeta2 sets Adam's decay of the variance (default 0.999).
func WithBeta2(beta2 float64) Option {
	return func(h *hyper) { h.beta2 = beta2; h.set("WithBeta2", beta2) }
}

// WithEps sets Adam's smoothing ε (default 1e-8).
func WithEps(eps float64) Option {
	return func(h *hyper) { h.eps = eps; h.set("WithEps", eps) }
}

// common are the options every solver here takes.
var common = []string{"WithLearnRate", "WithL1Reg", "WithL2Reg", "WithClip", "WithBatchSize"}

// configure applies opts over the defaults h and refuses the options kind
// does not take and values that are not finite.
func configure(kind string, h hyper, opts []Option, takes ...string) (hyper, error) {
	for _, o := range opts {
		o(&h)
	}
	allowed := append(append([]string(nil), common...), takes...)
	names := make([]string, 0, len(h.given))
	for name := range h.given {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return h, errors.Errorf("solvers: %s does not take %s (it takes %s)", kind, name, strings.Join(allowed, ", "))
		}
		if v := h.given[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return h, errors.Errorf("solvers: %s(%g): the value must be finite", name, v)
		}
	}
	h.given = nil
	return h, nil
}
