package correction_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/delaysim"
	"github.com/pipemare/pipemare/solvers"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// bestSteps tunes a constant step on a geometric grid (÷1.2 from hi down
// to hi/100, so that a good step bounds the runs of the slower ones) and returns the fewest steps to bring ‖w‖ to 1e-6·‖w0‖ on h with
// delay tau, and the step that did it; max+1 when none converges.
func bestSteps(t *testing.T, newSolver func(alpha float64) (gorgonia.Solver, error), h delaysim.Quadratic, tau int, hi float64, max int) (int, float64) {
	best, bestAlpha := max+1, 0.0
	for a := hi; a > hi/100; a /= 1.2 {
		s, err := newSolver(a)
		require.NoError(t, err)
		n, err := delaysim.StepsToConverge(s, h, []float64{1, 1}, tau, min(best, max), 1e-6)
		require.NoError(t, err)
		if n < best {
			best, bestAlpha = n, a
		}
	}
	return best, bestAlpha
}

// TestStepsToConvergeOnAnIllConditionedQuadratic is the ill-conditioned
// delayed quadratic (κ = 100, β = 0.9): the fewest steps each method needs, with its
// best constant step, to reach 1e-6 of the start on a two-dimensional
// quadratic with eigenvalues 1 and 0.01 on axes rotated by 30° (so that
// per-coordinate scaling cannot undo the conditioning), as the delay
// grows. Delay costs plain momentum tens of times the undelayed steps;
// spike compensation and prediction each cost less at every delay.
func TestStepsToConvergeOnAnIllConditionedQuadratic(t *testing.T) {
	if testing.Short() {
		t.Skip("tunes a step per method and delay: about a minute")
	}
	h := delaysim.Rotated2D(1, 0.01, math.Pi/6)
	taus := []int{0, 1, 2, 5, 10}
	const limit = 100000
	ms := methods()[1:] // momentum and its corrections; SGD is β = 0
	ms = append(ms, method{name: "NAdam", solver: func(a float64) (gorgonia.Solver, error) {
		// AsyncPP's NAdam without weight decay, which would pull the
		// weights to the optimum at 0 by itself.
		return solvers.NewNAdam(solvers.WithNAdamLearnRate(a), solvers.WithWeightDecay(0))
	}})
	steps := map[string][]int{}
	var table strings.Builder
	fmt.Fprintf(&table, "steps to 1e-6 on κ = 100, β = 0.9 (best constant step; × = the undelayed momentum's steps)\n%-14s", "method")
	for _, tau := range taus {
		fmt.Fprintf(&table, " %-22s", fmt.Sprintf("τ=%d", tau))
	}
	for _, m := range ms {
		fmt.Fprintf(&table, "\n%-14s", m.name)
		for _, tau := range taus {
			hi := 1.0 // NAdam's step is not bounded by the curvature
			if m.char != nil {
				hi = 1.25 * polyBound(t, m, max(tau, 1)) // above the stable step for λ_max = 1
				if tau == 0 {
					hi = 2 * (1 + beta)
				}
			}
			n, alpha := bestSteps(t, m.solver, h, tau, hi, limit)
			steps[m.name] = append(steps[m.name], n)
			fmt.Fprintf(&table, " %6d %5.1f× α=%-7.3g", n, float64(n)/float64(steps["momentum"][0]), alpha)
		}
	}
	t.Log(table.String())
	plain := steps["momentum"]
	require.Greater(t, float64(plain[4])/float64(plain[0]), 10.0, "a delay of 10 costs plain momentum many times the steps")
	for i, tau := range taus[1:] {
		for _, name := range []string{"spike", "predict"} {
			require.Less(t, steps[name][i+1], plain[i+1], "%s at τ=%d needs fewer steps than plain momentum", name, tau)
		}
	}
}
