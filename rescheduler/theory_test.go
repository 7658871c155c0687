package rescheduler

import (
	"math"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stableBound is the largest αλ for which delayed gradient descent
// w_{k+1} = w_k − αλ·w_{k−τ} converges: 2·sin(π/(2(2τ+1))).
func stableBound(tau int) float64 { return 2 * math.Sin(math.Pi/float64(2*(2*tau+1))) }

// delayedQuadratic runs gradient steps of s on f(w) = Σ λ_j w_j²/2, where the
// gradient is taken at the weights of tau steps ago (before the start, at
// the initial point w_j = 1), and returns max_j |w_j| after steps steps.
func delayedQuadratic(t *testing.T, s gorgonia.Solver, lambda []float64, tau, steps int) float64 {
	final, _ := delayedQuadraticPeak(t, s, lambda, tau, steps)
	return final
}

// delayedQuadraticPeak is delayedQuadratic that also returns the largest
// max_j |w_j| seen during the run (+Inf once anything overflows).
func delayedQuadraticPeak(t *testing.T, s gorgonia.Solver, lambda []float64, tau, steps int) (final, peak float64) {
	d := len(lambda)
	w := tensor.New(tensor.WithShape(d), tensor.WithBacking(make([]float64, d)))
	g := tensor.New(tensor.WithShape(d), tensor.WithBacking(make([]float64, d)))
	wd := w.Data().([]float64)
	for j := range wd {
		wd[j] = 1
	}
	history := [][]float64{append([]float64(nil), wd...)}
	model := []gorgonia.ValueGrad{vg{w, g}}
	for k := 0; k < steps; k++ {
		old := history[max(0, len(history)-1-tau)]
		for j := range lambda {
			g.Data().([]float64)[j] = lambda[j] * old[j]
		}
		require.NoError(t, s.Step(model))
		history = append(history, append([]float64(nil), wd...))
		if len(history) > tau+1 {
			history = history[1:]
		}
		for _, x := range wd {
			peak = math.Max(peak, math.Abs(x))
			if math.IsNaN(x) {
				peak = math.Inf(1)
			}
		}
	}
	for _, x := range wd {
		final = math.Max(final, math.Abs(x))
	}
	return final, peak
}

// skipUnderRace skips a single-goroutine arithmetic test under the race
// detector (see testutil.RaceEnabled).
func skipUnderRace(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("single-goroutine arithmetic: go test ./... runs it without the race detector")
	}
}

func vanilla(alpha float64) gorgonia.Solver {
	return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(alpha))
}

// TestDelayedSGDStabilityBound checks the bound the rescheduling rests on:
// with fixed delay τ, a step with αλ 10% above 2·sin(π/(2(2τ+1))) diverges
// and one 10% below converges (the bound's values: τ=1 → 1.0,
// τ=2 → 0.618, τ=5 → 0.2846, τ=10 → 0.1495).
func TestDelayedSGDStabilityBound(t *testing.T) {
	skipUnderRace(t)
	require.InDelta(t, 1.0, stableBound(1), 1e-12)
	require.InDelta(t, 0.618, stableBound(2), 1e-3)
	require.InDelta(t, 0.2846, stableBound(5), 1e-4)
	require.InDelta(t, 0.1495, stableBound(10), 1e-4)
	for _, tau := range []int{1, 2, 5, 10} {
		for _, lambda := range []float64{0.5, 1, 4} {
			b := stableBound(tau) / lambda
			below := delayedQuadratic(t, vanilla(0.9*b), []float64{lambda}, tau, 4000)
			above := delayedQuadratic(t, vanilla(1.1*b), []float64{lambda}, tau, 4000)
			require.Less(t, below, 1e-3, "τ=%d λ=%g: α 10%% below the bound must converge", tau, lambda)
			require.Greater(t, above, 1e3, "τ=%d λ=%g: α 10%% above the bound must diverge", tau, lambda)
		}
	}
}

// TestT1RescuesAScheduleThatDivergesWithNaiveRates runs five "stages" with
// the delays of a P=5, N=1 PipeMare pipeline (τ_i = 2(P−1−i)+1 = 9, 7, 5,
// 3, 1) on a diagonal quadratic with spread curvatures, at the synchronous
// optimum α = 1/λ_max with a step decay ×0.1 after 300 steps. Naive
// per-stage rates blow up (×10⁶) on the delayed stages before the decay; T1
// (Power, K = 3000) starts each stage at α/τ_i and converges (8000 steps),
// with both
// rescale paths.
func TestT1RescuesAScheduleThatDivergesWithNaiveRates(t *testing.T) {
	skipUnderRace(t)
	lambda := []float64{1, 0.5, 0.25, 0.1}
	base := Milestones(Constant(1), 0.1, 300)
	for i, tau := range []int{9, 7, 5, 3, 1} {
		naive, err := New(vanilla(1), WithBase(base), WithDelay(float64(tau)), WithPhase(0))
		require.NoError(t, err)
		_, peak := delayedQuadraticPeak(t, naive, lambda, tau, 3000)
		if tau > 1 {
			require.Greater(t, peak, 1e6, "stage %d (τ=%d): naive rates must blow up before the decay", i, tau)
		}
		for _, rescale := range []Rescale{Power{}, Linear{}} {
			t1, err := New(vanilla(1), WithBase(base), WithDelay(float64(tau)), WithPhase(3000), WithRescale(rescale))
			require.NoError(t, err)
			final, peak := delayedQuadraticPeak(t, t1, lambda, tau, 8000)
			require.LessOrEqual(t, peak, 1.0, "stage %d (τ=%d) with T1 %T never grows", i, tau, rescale)
			require.Less(t, final, 1e-3, "stage %d (τ=%d) with T1 %T converges", i, tau, rescale)
		}
	}
}

// TestDelayedMomentumStabilityBound checks why T1 alone cannot save a model
// trained with momentum: heavy ball with β (gorgonia's Momentum) on
// f(w) = λw²/2 is stable up to αλ < 2(1+β) without delay, but only up to
// αλ < 1−β with a delay of one step (characteristic polynomial
// z² − (1+β)z + β + αλ) — 38 times less at β = 0.9, where plain SGD
// (β = 0) loses a factor 2. T1's α/τ is 1 at τ = 1.
func TestDelayedMomentumStabilityBound(t *testing.T) {
	skipUnderRace(t)
	for _, beta := range []float64{0, 0.5, 0.9} {
		for _, c := range []struct {
			tau   int
			bound float64
		}{{0, 2 * (1 + beta)}, {1, 1 - beta}} {
			for _, lambda := range []float64{0.5, 4} {
				at := func(f float64) (final, peak float64) {
					s := gorgonia.NewMomentum(gorgonia.WithLearnRate(f*c.bound/lambda), gorgonia.WithMomentum(beta))
					return delayedQuadraticPeak(t, s, []float64{lambda}, c.tau, 4000)
				}
				below, _ := at(0.9)
				_, above := at(1.1)
				require.Less(t, below, 1e-3, "β=%g τ=%d λ=%g: α 10%% below the bound must converge", beta, c.tau, lambda)
				require.Greater(t, above, 1e3, "β=%g τ=%d λ=%g: α 10%% above the bound must diverge", beta, c.tau, lambda)
			}
		}
	}
}
