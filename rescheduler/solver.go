package rescheduler

import (
	"github.com/pipemare/pipemare/internal/reach"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Solver is a gorgonia.Solver that sets the learning rate of the solver it
// wraps before every step to α_{k,i} = α_k · Rescale(τ_i, k, K).
//
// One Solver serves one pipeline stage. The engine calls SetDelay (from the
// stage's goroutine, like Step); Rate and Steps may be read between steps.
// It implements only its own hooks: an engine reaches the solvers it wraps
// through solvers.Chain (Inner), so decorators compose:
// rescheduler.New(correction.New(gorgonia.NewMomentum())).
type Solver struct {
	inner    gorgonia.Solver
	base     Schedule
	rescale  Rescale
	phase    int
	phaseSet bool
	tau      float64
	fixedTau bool
	measured bool
	k        int
	kPhase   int
	rate     float64
}

// Option configures a Solver.
type Option func(*Solver)

// WithBase sets the base schedule α_k. Default: the wrapped solver's own
// learning rate, constant.
func WithBase(s Schedule) Option { return func(r *Solver) { r.base = s } }

// WithRescale chooses the path from α_k/τ to α_k. Default Power.
func WithRescale(f Rescale) Option { return func(r *Solver) { r.rescale = f } }

// WithPhase sets K, the number of steps the rescaling lasts (the paper's
// rescheduling length): a natural K is the run's asynchronous steps, as the
// zoo's recipes use. K = 0 turns T1 off and leaves the base schedule alone.
// There is no default: New fails without WithPhase, since K has no scale of
// its own (it is a number of steps of the user's run) and a silent 0 would
// turn T1 off without a word. Only steps taken with a delay above 1 count
// towards K: a synchronous warm-up (during which the engine announces τ = 0,
// counted as 1) runs at the base rate and leaves the whole phase for the asynchronous
// steps that follow it.
func WithPhase(k int) Option { return func(r *Solver) { r.phase, r.phaseSet = k, true } }

// WithDelay fixes τ_i instead of taking it from the engine.
func WithDelay(tau float64) Option { return func(r *Solver) { r.tau, r.fixedTau = tau, true } }

// UseMeasuredDelay follows the delay the engine measures after every
// update (the mean over the minibatch's forwards) instead of the schedule's
// formula τ_i = ceil((2(P−1−i)+1)/N) that the engine announces.
func UseMeasuredDelay() Option { return func(r *Solver) { r.measured = true } }

// New wraps inner. It fails without WithPhase. The innermost solver of
// inner's chain must have a learning rate T1 can set: a solvers.LearnRater
// (solvers.SGD, Momentum, Adam, NAdam), or one of gorgonia's solvers whose
// rate gorgonia.WithLearnRate sets (Vanilla, Momentum, Adam, AdamW,
// RMSProp, Barzilai-Borwein).
func New(inner gorgonia.Solver, opts ...Option) (*Solver, error) {
	if inner == nil {
		return nil, errors.New("rescheduler: nil solver")
	}
	r := &Solver{inner: inner, rescale: Power{}, tau: 1}
	for _, o := range opts {
		o(r)
	}
	eta, err := learnRate(innermost(inner))
	if err != nil {
		return nil, errors.Wrap(err, "rescheduler")
	}
	if r.base == nil {
		r.base = Constant(eta)
	}
	if r.tau < 1 {
		return nil, errors.Errorf("rescheduler: WithDelay(%g): a delay is at least 1", r.tau)
	}
	if !r.phaseSet {
		return nil, errors.New("rescheduler: WithPhase is required: T1 needs its length K in steps (for example the run's asynchronous steps; WithPhase(0) for the base schedule alone)")
	}
	if r.phase < 0 {
		return nil, errors.Errorf("rescheduler: WithPhase(%d): the phase cannot be negative", r.phase)
	}
	return r, nil
}

// Step sets the wrapped solver's learning rate for this step and steps it.
func (r *Solver) Step(model []gorgonia.ValueGrad) error {
	r.rate = r.base.Rate(r.k) * r.rescale.Factor(r.tau, r.kPhase, r.phase)
	setLearnRate(r.inner, r.rate)
	if err := r.inner.Step(model); err != nil {
		return err
	}
	r.k++
	if r.tau > 1 {
		r.kPhase++
	}
	return nil
}

// SetDelay is called by the pipeline engine with the running schedule's τ_i
// (measured false) before the first step and at every switch of schedule
// (1 for a synchronous warm-up, then the PipeMare τ_i), and after every
// asynchronous update with the delay measured so far (measured true), which
// is followed only with UseMeasuredDelay. A delay below 1 counts as 1.
func (r *Solver) SetDelay(tau float64, measured bool) {
	if r.fixedTau || (measured && !r.measured) {
		return
	}
	r.tau = max(tau, 1)
}

// Delay is the τ_i in use.
func (r *Solver) Delay() float64 { return r.tau }

// Rate is the learning rate of the last step.
func (r *Solver) Rate() float64 { return r.rate }

// Steps is the number of steps taken.
func (r *Solver) Steps() int { return r.k }

// PhaseSteps is the number of steps taken with a delay above 1: the k of
// the rescale's min(k/K, 1).
func (r *Solver) PhaseSteps() int { return r.kPhase }

// Inner is the wrapped solver.
func (r *Solver) Inner() gorgonia.Solver { return r.inner }

// innermost is the solver at the bottom of s's chain of decorators.
func innermost(s gorgonia.Solver) gorgonia.Solver {
	c := solvers.Chain(s)
	return c[len(c)-1]
}

// setLearnRate sets the rate of the innermost solver.
func setLearnRate(s gorgonia.Solver, eta float64) {
	in := innermost(s)
	if lr, ok := in.(solvers.LearnRater); ok {
		lr.SetLearnRate(eta)
		return
	}
	gorgonia.WithLearnRate(eta)(in)
}

// learnRate reads the learning rate of s, the innermost solver of a chain:
// through solvers.LearnRater, or for gorgonia's own solvers from their
// unexported field (package reach, whose version gate it may return). A
// solver whose rate it cannot read is one whose rate T1 cannot set.
func learnRate(s gorgonia.Solver) (float64, error) {
	if lr, ok := s.(solvers.LearnRater); ok {
		return lr.LearnRate(), nil
	}
	var name string
	switch s.(type) {
	case *gorgonia.VanillaSolver, *gorgonia.Momentum, *gorgonia.AdamSolver, *gorgonia.RMSPropSolver, *gorgonia.BarzilaiBorweinSolver:
		name = "eta"
	case *gorgonia.AdamW:
		name = "η"
	default:
		return 0, errors.Errorf("cannot set the learning rate of %T (it can for a solvers.LearnRater and gorgonia's Vanilla, Momentum, Adam, AdamW, RMSProp, Barzilai-Borwein)", s)
	}
	return reach.Float(s, name)
}
