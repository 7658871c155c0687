package correction_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/pipemare/pipemare/correction"
	"github.com/pipemare/pipemare/internal/testkit/delaysim"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// The theory of the delay corrections on the delayed quadratic
// f(w) = λw²/2, trained with the gradient of the forward τ steps back
// (delaysim: the same hooks the engine calls). With c = αλ, heavy ball
// (gorgonia's Momentum: v ← βv − αg, w ← w + v) and the corrections have
// the characteristic polynomials
//
//	plain:         z^τ(z−1)(z−β) + c·z
//	spike (D=τ):   z^τ(z−1)(z−β) + c·((a+b)z − βb),  a = β^D, b = (1−β^D)/(1−β)
//	predict (D=τ): z^τ(z−1)(z−β) + c·((1+D)z − D)
//	both:          z^(τ+1)(z−1)(z−β) + c·((a+b)z − βb)·((1+D)z − D)
//
// (z-transform of w_{k+1} = w_k + v_k with the filtered gradient of
// Spike, and u_fwd = w + D(w − w_prev) for the Predictor); SGD is β = 0.
// The recurrence is stable iff every root lies inside the unit circle.
const beta = 0.9

type method struct {
	name   string
	solver func(alpha float64) (gorgonia.Solver, error)
	char   func(c float64, tau int) delaysim.Poly
}

func momentum(alpha float64) gorgonia.Solver {
	return gorgonia.NewMomentum(gorgonia.WithLearnRate(alpha), gorgonia.WithMomentum(beta))
}

// base is z^τ(z−1)(z−β).
func base(tau int, b float64) delaysim.Poly {
	return delaysim.Poly{1, -1}.Mul(delaysim.Poly{1, -b}).Shift(tau)
}

// spikeTerm is (a+b)z − βb for D = tau.
func spikeTerm(tau int) delaysim.Poly {
	a := math.Pow(beta, float64(tau))
	b := (1 - a) / (1 - beta)
	return delaysim.Poly{a + b, -beta * b}
}

// predictTerm is (1+D)z − D for D = tau.
func predictTerm(tau int) delaysim.Poly { return delaysim.Poly{1 + float64(tau), -float64(tau)} }

func methods() []method {
	return []method{
		{"SGD", func(a float64) (gorgonia.Solver, error) {
			return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(a)), nil
		}, func(c float64, tau int) delaysim.Poly {
			return delaysim.Poly{1, -1}.Shift(tau).Add(c, delaysim.Poly{1})
		}},
		{"momentum", func(a float64) (gorgonia.Solver, error) { return momentum(a), nil },
			func(c float64, tau int) delaysim.Poly { return base(tau, beta).Add(c, delaysim.Poly{1, 0}) }},
		{"spike", func(a float64) (gorgonia.Solver, error) { return correction.NewSpike(momentum(a)) },
			func(c float64, tau int) delaysim.Poly { return base(tau, beta).Add(c, spikeTerm(tau)) }},
		{"predict", func(a float64) (gorgonia.Solver, error) { return correction.NewPredictor(momentum(a)) },
			func(c float64, tau int) delaysim.Poly { return base(tau, beta).Add(c, predictTerm(tau)) }},
		{"spike+predict", func(a float64) (gorgonia.Solver, error) {
			sc, err := correction.NewSpike(momentum(a))
			if err != nil {
				return nil, err
			}
			return correction.NewPredictor(sc)
		}, func(c float64, tau int) delaysim.Poly {
			return base(tau+1, beta).Add(c, spikeTerm(tau).Mul(predictTerm(tau)))
		}},
	}
}

// polyBound is the largest stable c of m at delay tau.
func polyBound(t *testing.T, m method, tau int) float64 {
	b, err := delaysim.StableBound(func(c float64) delaysim.Poly { return m.char(c, tau) }, 1e-6, 8)
	require.NoError(t, err, "%s τ=%d", m.name, tau)
	return b
}

// TestClosedFormsOfTheStableStep checks the characteristic polynomials
// against the closed forms: delayed SGD αλ < 2·sin(π/(2(2τ+1))); at τ = 1,
// by the Jury criterion on the cubics, heavy ball αλ < 1−β, spike
// compensation αλ < (√((1−β²)² + 4β²(1−β)) − (1−β²))/(2β²) and prediction
// αλ < (√((1−β)² + 4(1−β)) − (1−β))/2 (0.100, 0.253 and 0.270 at β = 0.9).
func TestClosedFormsOfTheStableStep(t *testing.T) {
	ms := map[string]method{}
	for _, m := range methods() {
		ms[m.name] = m
	}
	for _, tau := range []int{1, 2, 5, 10} {
		require.InDelta(t, 2*math.Sin(math.Pi/float64(2*(2*tau+1))), polyBound(t, ms["SGD"], tau), 1e-7, "SGD τ=%d", tau)
	}
	b2 := beta * beta
	require.InDelta(t, 1-beta, polyBound(t, ms["momentum"], 1), 1e-7)
	require.InDelta(t, (math.Sqrt((1-b2)*(1-b2)+4*b2*(1-beta))-(1-b2))/(2*b2), polyBound(t, ms["spike"], 1), 1e-7)
	require.InDelta(t, (math.Sqrt((1-beta)*(1-beta)+4*(1-beta))-(1-beta))/2, polyBound(t, ms["predict"], 1), 1e-7)
}

// TestStableStepOfEachMethod measures, by bisection on the real solvers
// driven through the engine's hooks, the largest step that still decays
// on the delayed quadratic, and checks it against the characteristic
// polynomial's bound: the code is the method the formulas describe.
func TestStableStepOfEachMethod(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("numerics in one goroutine, 5× slower under the race detector and nothing for it to check; go test ./... runs it")
	}
	taus := []int{1, 2, 5, 10}
	steps := 8000
	if testing.Short() {
		taus, steps = []int{1, 5}, 3000
	}
	var table strings.Builder
	fmt.Fprintf(&table, "stable αλ, β = %g (measured / characteristic polynomial)\n%-14s", beta, "method")
	for _, tau := range taus {
		fmt.Fprintf(&table, " %17s", fmt.Sprintf("τ=%d", tau))
	}
	for _, m := range methods() {
		fmt.Fprintf(&table, "\n%-14s", m.name)
		for _, tau := range taus {
			want := polyBound(t, m, tau)
			lambdas := []float64{1}
			if tau == taus[0] {
				lambdas = append(lambdas, 0.25) // the bound is on αλ
			}
			for _, lambda := range lambdas {
				got, err := delaysim.StableStep(m.solver, delaysim.Diagonal(lambda), []float64{1}, tau, steps, 0.8*want/lambda, 1.2*want/lambda)
				require.NoError(t, err, "%s τ=%d λ=%g", m.name, tau, lambda)
				require.InDelta(t, 1, got*lambda/want, 2e-3, "%s τ=%d λ=%g: measured αλ %.5g, polynomial %.5g", m.name, tau, lambda, got*lambda, want)
				if lambda == 1 {
					fmt.Fprintf(&table, " %8.4f / %6.4f", got, want)
				}
			}
		}
	}
	t.Log(table.String())
}
