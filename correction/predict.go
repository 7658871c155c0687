package correction

import (
	"github.com/pipemare/pipemare/solvers"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Predictor is linear weight prediction (Kosson, Chiley, Venigalla,
// Hestness, Köster, "Pipelined Backpropagation at Scale: Training Large
// Models without Batches", MLSys 2021, §4): a stage's forward reads its
// weights extrapolated forward by the delay D its gradient will have,
// along the recent update direction,
//
//	u_fwd = w + D·δ,   δ ← γ·δ + (1−γ)·(w_new − w_old) after every step,
//
// so the gradient is computed near the weights it will be applied to. With
// γ = 0 (the default) δ is the last update, which for momentum SGD at a
// constant rate is −η·v, the paper's prediction ŵ = w − η·D·v. δ is T2's
// velocity estimate (the Solver in this package), used forward instead of
// backward; the options are T2's (WithGamma, WithGammaFromD), with γ = 0
// unless given.
//
// The engine asks for u_fwd through ForwardWeights
// (solvers.ForwardWeighter). The backward should read what the forward read: a
// schedule that stashes weights stashes u_fwd; without a stash the current
// weights at the backward are where u_fwd predicted them to be. Do not put
// T2 outside a Predictor: T2's backward estimate undoes the prediction.
//
// Cost: δ and one weight-sized scratch buffer (w_old during a step, u_fwd
// between steps) per learnable. One Predictor serves one stage; the engine
// calls Step, ForwardWeights and SetDelay from that stage's goroutine.
type Predictor struct {
	t *Solver
}

// NewPredictor wraps inner.
func NewPredictor(inner gorgonia.Solver, opts ...Option) (*Predictor, error) {
	t, err := New(inner, append([]Option{WithGamma(0)}, opts...)...)
	if err != nil {
		return nil, err
	}
	t.kind = "correction.Predictor"
	return &Predictor{t: t}, nil
}

// Step steps the wrapped solver and updates δ with the change it made.
func (p *Predictor) Step(model []gorgonia.ValueGrad) error { return p.t.Step(model) }

// ForwardWeights returns u_fwd = w + delay·δ, in a buffer the Predictor
// owns until its next call or step; nil (use the current weights) before
// the first step or for a delay ≤ 0.
func (p *Predictor) ForwardWeights(delay int) ([]gorgonia.Value, error) {
	return p.t.shifted(delay, -float64(delay))
}

// SetDelay takes the engine's delay (for γ with WithGammaFromD).
func (p *Predictor) SetDelay(tau float64, measured bool) { p.t.SetDelay(tau, measured) }

// Gamma is the γ in use.
func (p *Predictor) Gamma() float64 { return p.t.Gamma() }

// Velocity returns δ (nil before the first step). Read it between steps.
func (p *Predictor) Velocity() []tensor.Tensor { return p.t.Velocity() }

// Inner is the wrapped solver.
func (p *Predictor) Inner() gorgonia.Solver { return p.t.inner }

// CorrectionBytes is the size of δ and the scratch buffer.
func (p *Predictor) CorrectionBytes() int64 { return p.t.CorrectionBytes() }

// SaveState returns the Predictor's own state — δ ("delta/i" for learnable
// i), the step count, the delay and γ — of kind "correction.Predictor",
// not the wrapped solver's.
func (p *Predictor) SaveState() (solvers.State, error) { return p.t.SaveState() }

// LoadState restores a State saved by a Predictor's SaveState. A restored
// Predictor needs Bind before it can answer ForwardWeights ahead of its
// first Step.
func (p *Predictor) LoadState(st solvers.State) error { return p.t.LoadState(st) }

// CheckState returns the error LoadState would return for st.
func (p *Predictor) CheckState(st solvers.State) error { return p.t.CheckState(st) }

// Bind tells the Predictor the learnables it steps (see Solver.Bind).
func (p *Predictor) Bind(model []gorgonia.ValueGrad) error { return p.t.Bind(model) }
