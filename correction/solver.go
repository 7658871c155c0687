package correction

import (
	"math"

	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/update"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Solver wraps a gorgonia solver with the T2 velocity estimate. One Solver
// serves one stage; the engine calls Step, BackwardWeights, SetDelay, Bind,
// SaveState and LoadState from that stage's worker goroutine only.
type Solver struct {
	inner gorgonia.Solver
	gamma float64
	d     float64         // γ = D^(1/τ) when > 0
	delta *slots.Set      // "delta"
	buf   []*tensor.Dense // w_old during Step, u_bkwd between steps
	live  []gorgonia.Value
	steps int
	held  shift // what buf holds between steps
	tau   float64
	kind  string // its State's Kind: "correction.Solver", or the Predictor's
}

// Option configures a Solver.
type Option func(*Solver)

// WithGamma sets γ, the decay of the velocity estimate (0 ≤ γ < 1; 0 uses
// the last step alone). Default 0.9.
func WithGamma(g float64) Option { return func(s *Solver) { s.gamma, s.d = g, 0 } }

// WithGammaFromD sets γ_i = D^(1/τ_i) from one constant D for every stage,
// τ_i being the delay the engine gives the stage (SetDelay): stages with
// longer delays average the velocity over more steps.
func WithGammaFromD(d float64) Option { return func(s *Solver) { s.d = d } }

// New wraps inner.
func New(inner gorgonia.Solver, opts ...Option) (*Solver, error) {
	if inner == nil {
		return nil, errors.New("correction: nil solver")
	}
	s := &Solver{inner: inner, gamma: 0.9, tau: 1, delta: slots.New("delta"), kind: kind}
	for _, o := range opts {
		o(s)
	}
	if s.d > 0 {
		if s.d >= 1 {
			return nil, errors.Errorf("correction: WithGammaFromD(%g): D must be in (0, 1)", s.d)
		}
		s.gamma = s.d
	}
	if s.gamma < 0 || s.gamma >= 1 {
		return nil, errors.Errorf("correction: γ = %g: must be in [0, 1)", s.gamma)
	}
	return s, nil
}

// Step steps the wrapped solver and updates δ with the change it made.
// The first Step binds the Solver to model (Bind); later ones must pass
// the same learnables.
func (s *Solver) Step(model []gorgonia.ValueGrad) error {
	if err := s.Bind(model); err != nil {
		return err
	}
	s.held = shift{}
	for i, vg := range model {
		if err := tensorutil.CopyInto(s.buf[i], vg.Value()); err != nil {
			return errors.Wrapf(err, "correction: learnable %d", i)
		}
	}
	if err := s.inner.Step(model); err != nil {
		return err
	}
	for i, vg := range model {
		if err := velocity(s.delta.Slot(0, i), s.buf[i], vg.Value(), s.gamma); err != nil {
			return errors.Wrapf(err, "correction: learnable %d", i)
		}
	}
	s.steps++
	return nil
}

// Bind binds the Solver to the learnables of model (not the solver it
// wraps: solvers.Bind binds every layer): it allocates δ and the scratch
// buffer, or checks model against the learnables it has, and takes the
// live weights BackwardWeights extrapolates from. Learnables must be
// float32 or float64 tensors. Call it after a LoadState into a fresh
// Solver, before its first BackwardWeights.
func (s *Solver) Bind(model []gorgonia.ValueGrad) error {
	live := make([]gorgonia.Value, len(model))
	for i, vg := range model {
		t, ok := vg.Value().(tensor.Tensor)
		if !ok {
			return errors.Errorf("correction: %s holds %T, want a tensor", slots.Describe(i, vg), vg.Value())
		}
		live[i] = t
	}
	if err := s.delta.Bind(model); err != nil {
		return errors.Wrap(err, "correction")
	}
	if s.buf == nil {
		for i := range model {
			d := s.delta.Slot(0, i)
			s.buf = append(s.buf, tensorutil.Zeros(d.Dtype(), d.Shape()))
		}
	}
	s.live = live
	s.held = shift{}
	return nil
}

// BackwardWeights returns u_bkwd = w − delay·δ, in a buffer the solver owns
// until its next call or step; nil (use the current weights) before the
// first step or for a zero delay. The caller only reads it. Asked again
// for the same delay with no step between (the microbatches of one step
// that share a delay), it returns the buffer as it is, without computing
// it again: the weights and δ change only in Step, Bind and LoadState.
func (s *Solver) BackwardWeights(delay int) ([]gorgonia.Value, error) {
	return s.shifted(delay, float64(delay))
}

// shifted returns w − k·δ in the scratch buffer; nil before the first step
// or for a delay ≤ 0.
func (s *Solver) shifted(delay int, k float64) ([]gorgonia.Value, error) {
	if s.steps == 0 || delay <= 0 {
		return nil, nil
	}
	if s.live == nil {
		return nil, errors.New("correction: a state was loaded but the Solver has no weights to extrapolate from; call solvers.Bind(solver, model) after loading")
	}
	out := make([]gorgonia.Value, len(s.live))
	for i := range s.live {
		out[i] = s.buf[i]
	}
	if s.held == (shift{k: k, step: s.steps}) {
		return out, nil
	}
	s.held = shift{}
	for i, w := range s.live {
		if err := extrapolate(s.buf[i], w, s.delta.Slot(0, i), k); err != nil {
			return nil, errors.Wrapf(err, "correction: learnable %d", i)
		}
	}
	s.held = shift{k: k, step: s.steps}
	return out, nil
}

// shift says what the scratch buffer holds between steps: w − k·δ after
// step. Its zero value holds nothing: nothing is extrapolated before the
// first step.
type shift struct {
	k    float64
	step int
}

// SetDelay takes the stage's delay from the engine; with WithGammaFromD it
// sets γ = D^(1/τ).
func (s *Solver) SetDelay(tau float64, measured bool) {
	if measured {
		return
	}
	s.tau = max(tau, 1)
	if s.d > 0 {
		s.gamma = math.Pow(s.d, 1/s.tau)
	}
}

// Gamma is the γ in use.
func (s *Solver) Gamma() float64 { return s.gamma }

// Velocity returns δ (nil before the first step or Bind). Read it between
// steps.
func (s *Solver) Velocity() []tensor.Tensor {
	var out []tensor.Tensor
	for i := 0; i < s.delta.Len(); i++ {
		out = append(out, s.delta.Slot(0, i))
	}
	return out
}

// Inner is the wrapped solver.
func (s *Solver) Inner() gorgonia.Solver { return s.inner }

// CorrectionBytes is the size of δ and the scratch buffer.
func (s *Solver) CorrectionBytes() int64 {
	n := s.delta.Bytes()
	for _, b := range s.buf {
		n += tensorutil.Bytes(b)
	}
	return n
}

// velocity sets δ = γδ + (1−γ)(w − old).
func velocity(delta, old tensor.Tensor, w gorgonia.Value, gamma float64) error {
	switch d := delta.Data().(type) {
	case []float64:
		update.Velocity(d, w.Data().([]float64), old.Data().([]float64), gamma)
	case []float32:
		update.Velocity(d, w.Data().([]float32), old.Data().([]float32), float32(gamma))
	default:
		return errors.Errorf("dtype %v is not supported", delta.Dtype())
	}
	return nil
}

// extrapolate sets dst = w − k·δ.
func extrapolate(dst tensor.Tensor, w gorgonia.Value, delta tensor.Tensor, k float64) error {
	switch d := dst.Data().(type) {
	case []float64:
		update.Shift(d, w.Data().([]float64), delta.Data().([]float64), k)
	case []float32:
		update.Shift(d, w.Data().([]float32), delta.Data().([]float32), float32(k))
	default:
		return errors.Errorf("dtype %v is not supported", dst.Dtype())
	}
	return nil
}
