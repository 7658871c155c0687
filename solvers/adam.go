package solvers

import (
	"math"

	"github.com/pipemare/pipemare/internal/slots"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Adam is gorgonia's AdamSolver, bit-identical to it: at step t,
//
//	m ← β1·m + (1−β1)·g,   v ← β2·v + (1−β2)·g²
//	w ← w − η·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)
//
// Its state is the mean m and the variance v per learnable and the step
// count t.
//
// One Adam serves one model (one pipeline stage); Step, Bind, SaveState,
// LoadState and SetLearnRate are called from one goroutine.
type Adam struct {
	h     hyper
	mv    *slots.Set // "mean", "variance"
	steps int64
}

// NewAdam returns Adam with gorgonia's defaults (η = 0.001, ε = 1e-8,
// β1 = 0.9, β2 = 0.999, batch 1). It takes WithLearnRate, WithBeta1,
// WithBeta2, WithEps, WithL1Reg, WithL2Reg, WithClip and WithBatchSize.
func NewAdam(opts ...Option) (*Adam, error) {
	h, err := configure("Adam", hyper{eta: 0.001, eps: 1e-8, beta1: 0.9, beta2: 0.999, batch: 1}, opts, "WithBeta1", "WithBeta2", "WithEps")
	if err != nil {
		return nil, err
	}
	return &Adam{h: h, mv: slots.New("mean", "variance")}, nil
}

// Bind allocates zero moments for each learnable of model, or checks
// model against the learnables the solver has.
func (s *Adam) Bind(model []gorgonia.ValueGrad) error {
	return errors.Wrap(s.mv.Bind(model), "solvers: Adam")
}

// Step updates every learnable of model and zeroes its gradient. The
// first Step binds the solver to model (Bind); later ones must pass the
// same learnables. It checks every learnable before it changes any.
func (s *Adam) Step(model []gorgonia.ValueGrad) error {
	entries, err := resolve("Adam", model)
	if err != nil {
		return err
	}
	if err := s.Bind(model); err != nil {
		return err
	}
	s.steps++
	c1 := 1 - math.Pow(s.h.beta1, float64(s.steps))
	c2 := 1 - math.Pow(s.h.beta2, float64(s.steps))
	for i, e := range entries {
		m, v := s.mv.Slot(0, i), s.mv.Slot(1, i)
		switch w := e.w.(type) {
		case []float32:
			adam(w, e.g.([]float32), m.Float32s(), v.Float32s(), newAdamParams[float32](&s.h, c1, c2), e.scalar)
		case []float64:
			adam(w, e.g.([]float64), m.Float64s(), v.Float64s(), newAdamParams[float64](&s.h, c1, c2), e.scalar)
		}
		e.done()
	}
	return nil
}

type adamParams[T float] struct {
	params[T]
	beta1, beta2, omb1, omb2, eps, cv1, cv2 T
}

// newAdamParams converts as gorgonia does: 1−β in T, 1/(1−βᵗ) from the
// float64 correction.
func newAdamParams[T float](h *hyper, c1, c2 float64) adamParams[T] {
	return adamParams[T]{
		params: newParams[T](h),
		beta1:  T(h.beta1), beta2: T(h.beta2),
		omb1: T(1) - T(h.beta1), omb2: T(1) - T(h.beta2),
		eps: T(h.eps), cv1: T(1) / T(c1), cv2: T(1) / T(c2),
	}
}

func adam[T float](w, g, m, v []T, p adamParams[T], scalar bool) {
	if scalar { // gorgonia's scalar code, expression for expression
		gi := p.prepScalar(g[0], w[0])
		newM := T(p.beta1*m[0]) + T(p.omb1*gi)
		newV := T(p.beta2*v[0]) + T(T(p.omb2*gi)*gi)
		m[0], v[0] = newM, newV
		mHat := T(p.cv1 * newM)
		vHat := T(p.cv2 * newV)
		w[0] += T(p.negEta*mHat) / (sqrt(vHat) + p.eps)
		return
	}
	// gorgonia's tensor operations, one rounding each
	p.prep(g, w)
	for i, gi := range g {
		t1 := T(gi * p.omb1)
		g2 := T(T(gi*gi) * p.omb2)
		t1 += T(m[i] * p.beta1) // tensor.Mul(m, β1, WithIncr(t1))
		g2 += T(v[i] * p.beta2)
		m[i], v[i] = t1, g2
		mHat := T(T(t1*p.cv1) * p.negEta)
		vHat := sqrt(T(g2*p.cv2)) + p.eps
		w[i] = w[i] + mHat/vHat
	}
}

// LearnRate is η.
func (s *Adam) LearnRate() float64 { return s.h.eta }

// SetLearnRate sets η for the following steps.
func (s *Adam) SetLearnRate(eta float64) { s.h.eta = eta }

// Steps is t, the number of steps taken (or loaded).
func (s *Adam) Steps() int64 { return s.steps }

// StateBytes is the size of the moments (asyncvm's memory report).
func (s *Adam) StateBytes() int64 { return s.mv.Bytes() }

// adamKind is the State.Kind of Adam.
const adamKind = "solvers.Adam"

// SaveState returns t and a copy of each learnable's moments ("mean/<i>",
// "variance/<i>"; none before Bind or the first Step).
func (s *Adam) SaveState() (State, error) {
	st := State{Kind: adamKind, Ints: map[string]int64{"steps": s.steps}, Tensors: map[string]tensor.Tensor{}}
	return st, s.mv.Save(st.Tensors)
}

// CheckState returns the error LoadState would return for st.
func (s *Adam) CheckState(st State) error {
	return checkSlots(st, adamKind, s.mv)
}

// LoadState restores a State saved by an Adam over the same learnables.
func (s *Adam) LoadState(st State) error {
	return loadSlots(st, adamKind, s.mv, &s.steps)
}

// checkSlots is the CheckState of a solver whose state is a step count and
// slots.
func checkSlots(st State, kind string, set *slots.Set) error {
	if err := st.Check(kind, []string{"steps"}, nil); err != nil {
		return err
	}
	if _, err := set.Check(st.Tensors, st.Ints["steps"] > 0); err != nil {
		return errors.Wrapf(err, "solvers: %s state", kind)
	}
	return nil
}

// loadSlots is the LoadState of a solver whose state is a step count and
// slots: it checks everything, then loads.
func loadSlots(st State, kind string, set *slots.Set, steps *int64) error {
	if err := checkSlots(st, kind, set); err != nil {
		return err
	}
	if _, err := set.Load(st.Tensors, st.Ints["steps"] > 0); err != nil {
		return errors.Wrapf(err, "solvers: %s state", kind) // unreachable: checked
	}
	*steps = st.Ints["steps"]
	return nil
}
