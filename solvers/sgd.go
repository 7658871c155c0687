package solvers

import (
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// SGD is gorgonia's VanillaSolver, w ← w − η·g after regularisation,
// batch scaling and clipping, with a step counter as its state. Its
// results are bit-identical to gorgonia's.
//
// One SGD serves one model (one pipeline stage); Step, SaveState,
// LoadState and SetLearnRate are called from one goroutine.
type SGD struct {
	h     hyper
	steps int64
}

// NewSGD returns SGD with gorgonia's defaults (η = 0.001, batch 1, no
// regularisation, no clipping). It takes WithLearnRate, WithL1Reg,
// WithL2Reg, WithClip and WithBatchSize.
func NewSGD(opts ...Option) (*SGD, error) {
	h, err := configure("SGD", hyper{eta: 0.001, batch: 1}, opts)
	if err != nil {
		return nil, err
	}
	return &SGD{h: h}, nil
}

// Step updates every learnable of model from its gradient and zeroes the
// gradient. It checks every learnable before it changes any.
func (s *SGD) Step(model []gorgonia.ValueGrad) error {
	entries, err := resolve("SGD", model)
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch w := e.w.(type) {
		case []float32:
			sgd(w, e.g.([]float32), newParams[float32](&s.h), e.scalar)
		case []float64:
			sgd(w, e.g.([]float64), newParams[float64](&s.h), e.scalar)
		}
		e.done()
	}
	s.steps++
	return nil
}

func sgd[T float](w, g []T, p params[T], scalar bool) {
	if scalar {
		w[0] += T(p.negEta * p.prepScalar(g[0], w[0]))
		return
	}
	p.prep(g, w)
	eta := p.negEta
	for i := range w {
		w[i] = w[i] + T(g[i]*eta)
	}
}

// LearnRate is η.
func (s *SGD) LearnRate() float64 { return s.h.eta }

// SetLearnRate sets η for the following steps.
func (s *SGD) SetLearnRate(eta float64) { s.h.eta = eta }

// Steps is the number of steps taken (or loaded).
func (s *SGD) Steps() int64 { return s.steps }

// StateBytes is 0: SGD keeps no tensor (asyncvm's memory report).
func (s *SGD) StateBytes() int64 { return 0 }

// sgdKind is the State.Kind of SGD.
const sgdKind = "solvers.SGD"

// SaveState returns the step count.
func (s *SGD) SaveState() (State, error) {
	return State{Kind: sgdKind, Ints: map[string]int64{"steps": s.steps}}, nil
}

// CheckState returns the error LoadState would return for st.
func (s *SGD) CheckState(st State) error {
	if err := st.Check(sgdKind, []string{"steps"}, nil); err != nil {
		return err
	}
	if len(st.Tensors) > 0 {
		return errors.Errorf("solvers: %s state: SGD keeps no tensors, the state has %d", sgdKind, len(st.Tensors))
	}
	return nil
}

// LoadState restores a State saved by an SGD.
func (s *SGD) LoadState(st State) error {
	if err := s.CheckState(st); err != nil {
		return err
	}
	s.steps = st.Ints["steps"]
	return nil
}
