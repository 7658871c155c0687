package schedule

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplayTableMatchesFormulas: over P ∈ {2, 4, 8, 16, 32} and N ∈ {1, 2,
// 4, 8, 16, 32}, every schedule's replayed bubble fraction, activations and
// weight versions are within 2 % of its formula wherever the formula holds,
// and the formulas hold over the whole range they claim: every schedule
// with one has rows where it holds.
func TestReplayTableMatchesFormulas(t *testing.T) {
	rows := Table(All(), []int{2, 4, 8, 16, 32}, []int{1, 2, 4, 8, 16, 32})
	held := map[string]int{}
	for _, r := range rows {
		if !r.Holds {
			continue
		}
		held[r.Schedule]++
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"bubble", r.Measured.Bubble, r.Formula.Bubble},
			{"activations", r.Measured.Activations, r.Formula.Activations},
			{"weights", r.Measured.Weights, r.Formula.Weights},
		} {
			require.LessOrEqual(t, math.Abs(c.got-c.want), 0.02*c.want+1e-12, "%s P%d N%d K%d %s: measured %g, formula %g", r.Schedule, r.P, r.N, r.Steps, c.what, c.got, c.want)
		}
	}
	for _, s := range All() {
		if s.Formula != nil {
			require.Positive(t, held[s.Name], "%s: its formula holds nowhere in the table", s.Name)
		}
	}
}

// TestZeroBubbleOrdering: at P = 8, N = 32, with equal F, I and W times,
// the replay ranks the schedules as Qi et al. do — ZB-H1's bubble about a
// third of 1F1B's (18 %); ZB-H2's, ZB-V's and PipeMare's below 2 % over 16
// steps (the two without a flush fill the pipeline once per run) — and
// ZB-H1 and ZB-V hold no more activations than 1F1B.
func TestZeroBubbleOrdering(t *testing.T) {
	const p, n = 8, 32
	m := func(s Schedule) Measure { return Measured(s, p, n, 16) }
	f1b, h1, h2, v, pm := m(OneFOneB()), m(ZBH1()), m(ZBH2()), m(ZBV()), m(PipeMare())
	require.InDelta(t, 1.0/3, h1.Bubble/f1b.Bubble, 0.05)
	for name, b := range map[string]float64{"zb-h2": h2.Bubble, "zb-v": v.Bubble, "pipemare": pm.Bubble} {
		require.Less(t, b, 0.02, name)
	}
	require.LessOrEqual(t, h1.Activations, f1b.Activations)
	require.Less(t, v.Activations, f1b.Activations, "ZB-V's 1F1B memory is over W = P/2 workers")
	require.Greater(t, h2.Activations, f1b.Activations, "ZB-H2 pays with memory")
}
