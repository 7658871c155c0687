package method

import (
	"fmt"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/solvers"
	"gorgonia.org/gorgonia"
)

// Optimizer builds the innermost solver of a stage's chain at learning
// rate eta (the rate layer sets it again before every step).
type Optimizer interface {
	Name() string
	New(eta float64) (gorgonia.Solver, error)
}

// SGD is solvers.NewSGD: gorgonia's VanillaSolver, bit for bit.
type SGD struct{}

// Name is "SGD".
func (SGD) Name() string { return "SGD" }

// New returns solvers.NewSGD at rate eta.
func (SGD) New(eta float64) (gorgonia.Solver, error) {
	return solvers.NewSGD(solvers.WithLearnRate(eta))
}

// Momentum is solvers.NewMomentum with β = Beta: gorgonia's Momentum, bit
// for bit.
type Momentum struct{ Beta float64 }

// Name is "Momentum(β)".
func (m Momentum) Name() string { return fmt.Sprintf("Momentum(%g)", m.Beta) }

// New returns solvers.NewMomentum at rate eta.
func (m Momentum) New(eta float64) (gorgonia.Solver, error) {
	return solvers.NewMomentum(solvers.WithLearnRate(eta), solvers.WithMomentum(m.Beta))
}

// NAdam is solvers.NewNAdam with AsyncPP's hyper-parameters (its
// defaults).
type NAdam struct{}

// Name is "NAdam".
func (NAdam) Name() string { return "NAdam" }

// New returns solvers.NewNAdam at rate eta.
func (NAdam) New(eta float64) (gorgonia.Solver, error) {
	return solvers.NewNAdam(solvers.WithNAdamLearnRate(eta))
}

// Technique wraps a stage's solver in a decorator of package correction.
type Technique interface {
	Name() string
	Wrap(s gorgonia.Solver) (gorgonia.Solver, error)
}

// Spike is spike compensation (correction.NewSpike, Kosson et al.): it
// needs a momentum optimizer.
type Spike struct{}

// Name is "spike compensation".
func (Spike) Name() string { return "spike compensation" }

// Wrap returns correction.NewSpike(s).
func (Spike) Wrap(s gorgonia.Solver) (gorgonia.Solver, error) { return correction.NewSpike(s) }

// Predict is linear weight prediction (correction.NewPredictor, Kosson et
// al.): the forwards read w + τ_i·δ.
type Predict struct{}

// Name is "weight prediction".
func (Predict) Name() string { return "weight prediction" }

// Wrap returns correction.NewPredictor(s).
func (Predict) Wrap(s gorgonia.Solver) (gorgonia.Solver, error) { return correction.NewPredictor(s) }

// T2 is PipeMare's discrepancy correction with γ = Gamma (correction.New).
type T2 struct{ Gamma float64 }

// Name is "T2".
func (T2) Name() string { return "T2" }

// Wrap returns correction.New(s) with γ = Gamma.
func (t T2) Wrap(s gorgonia.Solver) (gorgonia.Solver, error) {
	return correction.New(s, correction.WithGamma(t.Gamma))
}
