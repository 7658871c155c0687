package solvers

import (
	"math"

	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// NAdam is Adam with Nesterov momentum (Dozat, "Incorporating Nesterov
// Momentum into Adam", ICLR 2016 workshop) and decoupled weight decay
// (Loshchilov & Hutter), exactly as PyTorch's torch.optim.NAdam computes it
// (torch/optim/nadam.py, _single_tensor_nadam, decoupled_weight_decay=True),
// with the global gradient-norm clipping of torch.nn.utils.clip_grad_norm_
// before it. It is the optimizer of Ajanthan et al., "Nesterov method for
// asynchronous pipeline parallel optimization" (ICML 2025): their code
// (PluralisResearch/AsyncPP, optim/nadamw.py, NAdamWithWeightStashing; step
// in optim/optimizer.py, OptimizerWithWeightStashing.step) clips each
// stage's gradients to norm 10 and steps torch's NAdam, whose Nesterov
// look-ahead is what compensates the delay; the weights the backward reads
// are the forward's stash (asyncvm.PipeDream here).
//
// At step t (from 1), for every learnable w with gradient g:
//
//	g     ← g · min(1, C/(‖g_all‖₂ + 1e-6))       (C = WithClipNorm, all learnables)
//	w     ← w · (1 − η·λ)                          (decoupled weight decay λ)
//	μ_t   = β1·(1 − ½·0.96^(t·ψ)),  μ_{t+1} likewise (ψ = momentum decay)
//	Π     ← Π·μ_t                                  (Π_0 = 1)
//	m     ← m + (1−β1)·(g − m)                     (torch's lerp)
//	v     ← β2·v + (1−β2)·g²
//	d     = √(v/(1−β2^t)) + ε
//	w     ← w − η(1−μ_t)/(1−Π) · g/d − η·μ_{t+1}/(1−Π·μ_{t+1}) · m/d
//
// Π is kept in float32, as torch keeps its mu_product tensor. The defaults
// are the AsyncPP run (run.bash, main_with_runtime.py): η = 3e-4,
// β1 = 0.99, β2 = 0.999, ε = 1e-8, ψ = 0.004, λ = 0.01, C = 10 — not
// torch's NAdam defaults (η = 2e-3, β1 = 0.9, λ = 0, no clipping). Their
// warm-up then cosine to 0.1·η is rescheduler.Warmup(rescheduler.Cosine(…))
// around it: the rescheduler sets the rate through SetLearnRate.
//
// Why the look-ahead helps a delay: with the denominator d frozen, the
// update is Nesterov momentum, whose characteristic polynomial on a
// delayed quadratic equals that of spike compensation (package correction)
// with D = 1; see the tests.
//
// One NAdam serves one stage; the engine steps it from the stage's worker
// goroutine and always passes the same learnables in the same order. It
// updates the weights in place and zeroes the gradients, like gorgonia's
// solvers. Float64 and float32 learnables are supported.
type NAdam struct {
	eta, beta1, beta2, eps, psi, decay, clip float64

	moments *slots.Set // "m", "v"
	step    int64
	muProd  float32
}

// NAdamOption configures an NAdam.
type NAdamOption func(*NAdam)

// WithNAdamLearnRate sets η. Default 3e-4.
func WithNAdamLearnRate(eta float64) NAdamOption { return func(s *NAdam) { s.eta = eta } }

// WithNAdamBetas sets β1 (the momentum) and β2. Default 0.99, 0.999.
func WithNAdamBetas(beta1, beta2 float64) NAdamOption {
	return func(s *NAdam) { s.beta1, s.beta2 = beta1, beta2 }
}

// WithNAdamEps sets ε. Default 1e-8.
func WithNAdamEps(eps float64) NAdamOption { return func(s *NAdam) { s.eps = eps } }

// WithMomentumDecay sets ψ of μ_t = β1·(1 − ½·0.96^(t·ψ)). Default 0.004.
func WithMomentumDecay(psi float64) NAdamOption { return func(s *NAdam) { s.psi = psi } }

// WithWeightDecay sets the decoupled weight decay λ (w ← w·(1 − ηλ)
// before each step). Default 0.01; 0 turns it off.
func WithWeightDecay(lambda float64) NAdamOption { return func(s *NAdam) { s.decay = lambda } }

// WithClipNorm clips the gradients of all learnables together to global L2
// norm c before each step. Default 10; 0 turns clipping off.
func WithClipNorm(c float64) NAdamOption { return func(s *NAdam) { s.clip = c } }

// NewNAdam returns an NAdam with the AsyncPP defaults changed by opts.
func NewNAdam(opts ...NAdamOption) (*NAdam, error) {
	s := &NAdam{eta: 3e-4, beta1: 0.99, beta2: 0.999, eps: 1e-8, psi: 0.004, decay: 0.01, clip: 10, muProd: 1, moments: slots.New("m", "v")}
	for _, o := range opts {
		o(s)
	}
	switch {
	case !(s.eta >= 0):
		return nil, errors.Errorf("solvers: NAdam learning rate %g: must be ≥ 0", s.eta)
	case !(s.beta1 >= 0 && s.beta1 < 1) || !(s.beta2 >= 0 && s.beta2 < 1):
		return nil, errors.Errorf("solvers: NAdam betas (%g, %g): each must be in [0, 1)", s.beta1, s.beta2)
	case !(s.eps > 0):
		return nil, errors.Errorf("solvers: NAdam ε = %g: must be > 0", s.eps)
	case !(s.psi >= 0) || !(s.decay >= 0) || !(s.clip >= 0):
		return nil, errors.Errorf("solvers: NAdam momentum decay %g, weight decay %g, clip norm %g: none may be negative", s.psi, s.decay, s.clip)
	}
	return s, nil
}

// LearnRate is η (the rate of the next step). The rescheduler reads it.
func (s *NAdam) LearnRate() float64 { return s.eta }

// SetLearnRate sets η for the next steps. The rescheduler calls it before
// every step.
func (s *NAdam) SetLearnRate(eta float64) { s.eta = eta }

// StateBytes is the size of m and v.
func (s *NAdam) StateBytes() int64 { return s.moments.Bytes() }

// Bind binds the NAdam to model's learnables before its first Step (which
// otherwise does), or checks that model is the one it was bound to.
func (s *NAdam) Bind(model []gorgonia.ValueGrad) error {
	return errors.Wrap(s.moments.Bind(model), "solvers: NAdam")
}

// Step applies one NAdam update to every learnable of model and zeroes its
// gradient.
func (s *NAdam) Step(model []gorgonia.ValueGrad) error {
	ws, gs, err := s.prepare(model)
	if err != nil {
		return err
	}
	if s.clip > 0 {
		clipNorm(gs, s.clip)
	}
	s.step++
	t := float64(s.step)
	bc2 := 1 - math.Pow(s.beta2, t)
	mu := s.beta1 * (1 - 0.5*math.Pow(0.96, t*s.psi))
	muNext := s.beta1 * (1 - 0.5*math.Pow(0.96, (t+1)*s.psi))
	s.muProd *= float32(mu)
	prod := float64(s.muProd)
	c := nadamCoef{
		decay: 1 - s.eta*s.decay,
		lerp:  1 - s.beta1,
		beta2: s.beta2,
		bc2:   bc2,
		eps:   s.eps,
		cg:    -s.eta * (1 - mu) / (1 - prod),
		cm:    (-s.eta * muNext) / (1 - prod*muNext),
	}
	for i := range ws {
		switch w := ws[i].(type) {
		case []float64:
			nadamUpdate(w, gs[i].([]float64), s.moments.Slot(0, i).Float64s(), s.moments.Slot(1, i).Float64s(), c, s.decay != 0)
		case []float32:
			nadamUpdate(w, gs[i].([]float32), s.moments.Slot(0, i).Float32s(), s.moments.Slot(1, i).Float32s(), c, s.decay != 0)
		}
	}
	return nil
}

// prepare checks model against the state (allocating it at the first
// step) and returns the weights' and gradients' backing slices.
func (s *NAdam) prepare(model []gorgonia.ValueGrad) (ws, gs []any, err error) {
	if err := s.Bind(model); err != nil {
		return nil, nil, err
	}
	for i, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			return nil, nil, errors.Wrapf(err, "solvers: NAdam: learnable %d has no gradient", i)
		}
		w, wok := vg.Value().(tensor.Tensor)
		gt, gok := g.(tensor.Tensor)
		if !wok || !gok || w.RequiresIterator() || gt.RequiresIterator() {
			return nil, nil, errors.Errorf("solvers: NAdam: learnable %d: weights %T and gradient %T must be dense tensors", i, vg.Value(), g)
		}
		if w.Dtype() != gt.Dtype() || w.Shape().TotalSize() != gt.Shape().TotalSize() || (w.Dtype() != tensor.Float64 && w.Dtype() != tensor.Float32) {
			return nil, nil, errors.Errorf("solvers: NAdam: learnable %d: weights %v %v and gradient %v %v must be float64 or float32 of one size", i, w.Shape(), w.Dtype(), gt.Shape(), gt.Dtype())
		}
		ws, gs = append(ws, w.Data()), append(gs, gt.Data())
	}
	return ws, gs, nil
}

// nadamCoef holds one step's scalars.
type nadamCoef struct{ decay, lerp, beta2, bc2, eps, cg, cm float64 }

// nadamUpdate is one step on one learnable, in torch's order of operations
// (param.mul_, exp_avg.lerp_, exp_avg_sq.mul_.addcmul_, two addcdiv_), in
// the learnable's precision; it zeroes g.
func nadamUpdate[T float32 | float64](w, g, m, v []T, c nadamCoef, decay bool) {
	dec, lerp, b2, bc2, eps := T(c.decay), T(c.lerp), T(c.beta2), T(c.bc2), T(c.eps)
	cg, cm := T(c.cg), T(c.cm)
	for i := range w {
		if decay {
			w[i] *= dec
		}
		gi := g[i]
		if lerp < 0.5 { // at::lerp: start + weight·(end − start), or its mirror for weights ≥ ½
			m[i] += lerp * (gi - m[i])
		} else {
			m[i] = gi - (gi-m[i])*(1-lerp)
		}
		v[i] = v[i]*b2 + (1-b2)*gi*gi
		d := T(math.Sqrt(float64(v[i]/bc2))) + eps
		w[i] += cg * gi / d
		w[i] += cm * m[i] / d
		g[i] = 0
	}
}

// clipNorm scales all gradients by c/(‖g‖₂ + 1e-6) when that is below 1
// (torch.nn.utils.clip_grad_norm_).
func clipNorm(gs []any, c float64) {
	var sq float64
	for _, g := range gs {
		var n float64
		switch g := g.(type) {
		case []float64:
			for _, x := range g {
				n += x * x
			}
		case []float32:
			for _, x := range g {
				n += float64(x) * float64(x)
			}
		}
		sq += n
	}
	coef := c / (math.Sqrt(sq) + 1e-6)
	if coef >= 1 {
		return
	}
	for _, g := range gs {
		switch g := g.(type) {
		case []float64:
			for i := range g {
				g[i] *= coef
			}
		case []float32:
			for i := range g {
				g[i] *= float32(coef)
			}
		}
	}
}

// nadamKind is the solvers.State.Kind of an NAdam.
const nadamKind = "solvers.NAdam"

// SaveState returns the NAdam's state: the moments ("m/<i>", "v/<i>"; none
// before it is bound), the step count ("step") and the product of the μ_t
// so far ("mu_product").
func (s *NAdam) SaveState() (State, error) {
	st := State{Kind: nadamKind, Tensors: map[string]tensor.Tensor{}, Ints: map[string]int64{"step": s.step}, Floats: map[string]float64{"mu_product": float64(s.muProd)}}
	return st, s.moments.Save(st.Tensors)
}

// CheckState returns the error LoadState would return for st.
func (s *NAdam) CheckState(st State) error {
	if err := st.Check(nadamKind, []string{"step"}, []string{"mu_product"}); err != nil {
		return err
	}
	if _, err := s.moments.Check(st.Tensors, st.Ints["step"] > 0); err != nil {
		return errors.Wrap(err, "solvers: NAdam state")
	}
	return nil
}

// LoadState restores a State an NAdam saved, over the same learnables. It
// changes nothing when it fails.
func (s *NAdam) LoadState(st State) error {
	if err := s.CheckState(st); err != nil {
		return err
	}
	if _, err := s.moments.Load(st.Tensors, st.Ints["step"] > 0); err != nil {
		return errors.Wrap(err, "solvers: NAdam state") // unreachable: checked
	}
	s.step, s.muProd = st.Ints["step"], float32(st.Floats["mu_product"])
	return nil
}
