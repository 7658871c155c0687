package solvers

import (
	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pipemare/pipemare/internal/update"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Momentum is gorgonia's Momentum solver, bit-identical to it:
//
//	v ← β·v − η·g,   w ← w + v
//
// with gorgonia's two quirks kept. For a tensor learnable, L1 and L2
// regularisation read the velocity v, not the weights. A scalar learnable
// (*gorgonia.F32, *gorgonia.F64) regularises with its weight, and gorgonia
// never stores its velocity, which stays 0: a scalar takes plain SGD
// steps. Its state is the velocity per learnable and a step counter.
//
// One Momentum serves one model (one pipeline stage); Step, Bind,
// SaveState, LoadState and SetLearnRate are called from one goroutine.
type Momentum struct {
	h     hyper
	v     *slots.Set
	steps int64
}

// NewMomentum returns Momentum with gorgonia's defaults (η = 0.001,
// β = 0.9, batch 1, no regularisation, no clipping). It takes
// WithLearnRate, WithMomentum, WithL1Reg, WithL2Reg, WithClip and
// WithBatchSize.
func NewMomentum(opts ...Option) (*Momentum, error) {
	h, err := configure("Momentum", hyper{eta: 0.001, momentum: 0.9, batch: 1}, opts, "WithMomentum")
	if err != nil {
		return nil, err
	}
	return &Momentum{h: h, v: slots.New("velocity")}, nil
}

// Bind allocates a zero velocity for each learnable of model, or checks
// model against the learnables the solver has.
func (s *Momentum) Bind(model []gorgonia.ValueGrad) error {
	return errors.Wrap(s.v.Bind(model), "solvers: Momentum")
}

// Step updates every learnable of model and zeroes its gradient. The
// first Step binds the solver to model (Bind); later ones must pass the
// same learnables. It checks every learnable before it changes any.
func (s *Momentum) Step(model []gorgonia.ValueGrad) error {
	entries, err := resolve("Momentum", model)
	if err != nil {
		return err
	}
	if err := s.Bind(model); err != nil {
		return err
	}
	for i, e := range entries {
		v := s.v.Slot(0, i)
		switch w := e.w.(type) {
		case []float32:
			momentum(w, e.g.([]float32), v.Float32s(), newParams[float32](&s.h), float32(s.h.momentum), e.scalar)
		case []float64:
			momentum(w, e.g.([]float64), v.Float64s(), newParams[float64](&s.h), s.h.momentum, e.scalar)
		}
		e.done()
	}
	s.steps++
	return nil
}

func momentum[T float](w, g, v []T, p params[T], beta T, scalar bool) {
	if scalar { // the velocity is read, never written
		gi := p.prepScalar(g[0], w[0])
		w[0] += T(v[0]*beta) - T(-p.negEta*gi)
		return
	}
	p.prep(g, v)
	update.Momentum(w, g, v, beta, p.negEta)
}

// LearnRate is η.
func (s *Momentum) LearnRate() float64 { return s.h.eta }

// SetLearnRate sets η for the following steps.
func (s *Momentum) SetLearnRate(eta float64) { s.h.eta = eta }

// Momentum is β (spike compensation reads it: correction.NewSpike).
func (s *Momentum) Momentum() float64 { return s.h.momentum }

// Steps is the number of steps taken (or loaded).
func (s *Momentum) Steps() int64 { return s.steps }

// StateBytes is the size of the velocity (asyncvm's memory report).
func (s *Momentum) StateBytes() int64 { return s.v.Bytes() }

// momentumKind is the State.Kind of Momentum.
const momentumKind = "solvers.Momentum"

// SaveState returns the step count and a copy of the velocity of each
// learnable ("velocity/<i>"; none before Bind or the first Step).
func (s *Momentum) SaveState() (State, error) {
	st := State{Kind: momentumKind, Ints: map[string]int64{"steps": s.steps}, Tensors: map[string]tensor.Tensor{}}
	return st, s.v.Save(st.Tensors)
}

// CheckState returns the error LoadState would return for st.
func (s *Momentum) CheckState(st State) error {
	return checkSlots(st, momentumKind, s.v)
}

// LoadState restores a State saved by a Momentum over the same learnables.
func (s *Momentum) LoadState(st State) error {
	return loadSlots(st, momentumKind, s.v, &s.steps)
}
