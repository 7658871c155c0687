package correction

import (
	"math"

	"github.com/pipemare/pipemare/internal/reach"
	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Spike is spike compensation (Kosson, Chiley, Venigalla, Hestness,
// Köster, "Pipelined Backpropagation at Scale: Training Large Models
// without Batches", MLSys 2021, §4) around a momentum solver.
//
// With momentum β, a gradient applied at once contributes η·β^j to the
// weights j steps later, η/(1−β) in all. Applied D steps late it has missed
// its first D contributions, η(1−β^D)/(1−β). Spike compensation adds them
// as a spike on arrival and lets the rest decay as it would have:
//
//	v ← β·v + g,   w ← w − η·(a·v + b·g),   a = β^D,   b = (1 − β^D)/(1 − β)
//
// so that from its arrival on, a delayed gradient moves the weights exactly
// as an undelayed one would by then (a + b = 1 + β + … + β^D, then a·β^j =
// β^(D+j)), and its total is η/(1−β). (The paper's text could not be read
// here; this is derived from that stated goal, and the form is the paper's
// as we know it.) D = 0 or β = 0 is plain momentum.
//
// The decorator does not reach into the wrapped solver's velocity: it
// feeds it the filtered gradient
//
//	g'_k = (a + b)·g_k − β·b·g_{k−1}
//
// whose momentum v'_k = β·v'_{k−1} + g'_k equals a·v_k + b·g_k at every
// step, so gorgonia's Momentum (cw ← β·cw − η·g; w ← w + cw) makes exactly
// the update above at a constant rate; when a schedule changes η between
// two steps the two forms differ by (η_k − η_{k−1})/η_k of the β·b·g_{k−1}
// term. The wrapped solver's own gradient processing (gorgonia's l2reg,
// batch scaling, clipping) applies to g'.
//
// D is the delay the engine announces (SetDelay with measured false: the
// schedule's τ_i, 0 for a synchronous schedule, when it is plain momentum). β is read
// from the innermost solver: gorgonia's Momentum, Vanilla (β = 0), or any
// solver with a Momentum() float64 method.
//
// One Spike serves one stage; the engine calls Step and SetDelay from that
// stage's goroutine. It keeps g_{k−1}, one weight-sized buffer per
// learnable, reported as a correction buffer.
type Spike struct {
	inner gorgonia.Solver
	beta  float64
	d     float64
	prev  *slots.Set // "previous_gradient"
	steps int64
}

// NewSpike wraps inner, whose innermost solver gives β.
func NewSpike(inner gorgonia.Solver) (*Spike, error) {
	if inner == nil {
		return nil, errors.New("correction: NewSpike: nil solver")
	}
	chain := solvers.Chain(inner)
	beta, err := momentumOf(chain[len(chain)-1])
	if err != nil {
		return nil, errors.Wrap(err, "correction: NewSpike")
	}
	if !(beta >= 0 && beta < 1) {
		return nil, errors.Errorf("correction: NewSpike: momentum %g: spike compensation needs 0 ≤ β < 1", beta)
	}
	return &Spike{inner: inner, beta: beta, prev: slots.New("previous_gradient")}, nil
}

// momentumOf reads β from a solver: gorgonia's Momentum keeps it in an
// unexported field (package reach, whose version gate it may return).
func momentumOf(s gorgonia.Solver) (float64, error) {
	switch s := s.(type) {
	case interface{ Momentum() float64 }:
		return s.Momentum(), nil
	case *gorgonia.Momentum:
		return reach.Float(s, "momentum")
	case *gorgonia.VanillaSolver:
		return 0, nil
	}
	return 0, errors.Errorf("cannot read the momentum of %T (gorgonia's Momentum and Vanilla, or a solver with a Momentum() float64 method)", s)
}

// Coefficients returns a = β^D and b = (1 − β^D)/(1 − β) for the delay in
// use.
func (s *Spike) Coefficients() (a, b float64) {
	a = math.Pow(s.beta, s.d)
	return a, (1 - a) / (1 - s.beta)
}

// Step replaces each gradient by g' = (a+b)·g − β·b·g_prev, keeps g as
// g_prev and steps the wrapped solver.
func (s *Spike) Step(model []gorgonia.ValueGrad) error {
	if err := s.Bind(model); err != nil {
		return err
	}
	a, b := s.Coefficients()
	now, last := a+b, s.beta*b
	for i, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			return errors.Wrapf(err, "correction: Spike: learnable %d has no gradient", i)
		}
		gt, ok := g.(tensor.Tensor)
		prev := s.prev.Slot(0, i)
		if !ok || gt.RequiresIterator() || gt.Dtype() != prev.Dtype() || gt.Shape().TotalSize() != prev.Shape().TotalSize() {
			return errors.Errorf("correction: Spike: learnable %d: gradient %T %v must be a dense tensor like its weights (%v %v)", i, g, g.Shape(), prev.Shape(), prev.Dtype())
		}
		switch gd := gt.Data().(type) {
		case []float64:
			compensate(gd, prev.Float64s(), now, last)
		case []float32:
			compensate(gd, prev.Float32s(), float32(now), float32(last))
		}
	}
	if err := s.inner.Step(model); err != nil {
		return err
	}
	s.steps++
	return nil
}

// compensate sets g ← now·g − last·prev and prev ← the old g.
func compensate[T float32 | float64](g, prev []T, now, last T) {
	for i, x := range g {
		g[i] = now*x - last*prev[i]
		prev[i] = x
	}
}

// Bind binds the Spike to model's learnables before its first Step (which
// otherwise does), or checks that model is the one it was bound to.
func (s *Spike) Bind(model []gorgonia.ValueGrad) error {
	return errors.Wrap(s.prev.Bind(model), "correction: Spike")
}

// SetDelay takes D from the delay the engine announces for the running
// schedule (measured delays are ignored; below 0 counts as 0).
func (s *Spike) SetDelay(tau float64, measured bool) {
	if !measured {
		s.d = max(tau, 0)
	}
}

// Delay is the D in use.
func (s *Spike) Delay() float64 { return s.d }

// Beta is the momentum read from the wrapped solver.
func (s *Spike) Beta() float64 { return s.beta }

// Inner is the wrapped solver.
func (s *Spike) Inner() gorgonia.Solver { return s.inner }

// CorrectionBytes is the size of g_prev.
func (s *Spike) CorrectionBytes() int64 { return s.prev.Bytes() }

// spikeKind is the solvers.State.Kind of a Spike.
const spikeKind = "correction.Spike"

// SaveState returns the Spike's own fields: g_prev ("previous_gradient/i";
// none before it is bound), the step count ("steps") and D ("delay").
func (s *Spike) SaveState() (solvers.State, error) {
	st := solvers.State{
		Kind:    spikeKind,
		Tensors: map[string]tensor.Tensor{},
		Ints:    map[string]int64{"steps": s.steps},
		Floats:  map[string]float64{"delay": s.d},
	}
	return st, s.prev.Save(st.Tensors)
}

// CheckState returns the error LoadState would return for st.
func (s *Spike) CheckState(st solvers.State) error {
	if err := st.Check(spikeKind, []string{"steps"}, []string{"delay"}); err != nil {
		return err
	}
	if _, err := s.prev.Check(st.Tensors, st.Ints["steps"] > 0); err != nil {
		return errors.Wrap(err, "correction: Spike state")
	}
	return nil
}

// LoadState restores a State a Spike saved, over the same learnables. It
// changes nothing when it fails.
func (s *Spike) LoadState(st solvers.State) error {
	if err := s.CheckState(st); err != nil {
		return err
	}
	if _, err := s.prev.Load(st.Tensors, st.Ints["steps"] > 0); err != nil {
		return errors.Wrap(err, "correction: Spike state") // unreachable: checked
	}
	s.steps, s.d = st.Ints["steps"], st.Floats["delay"]
	return nil
}
