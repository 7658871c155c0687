package graphsplit

import (
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestLightenSendsTheFewestBytes: lighten moves the test CNN's cut before
// its second layer's weights back over the ops that read no learnable
// (the second convolution's im2col, the first max-pool) to where the
// fewest bytes cross, leaves every learnable in its stage, and keeps the
// cut where it was when the moved ops would make the later stage more than
// lightenSlack slower than the slowest stage before — or slower at all,
// for stages in one process (InOneProcess), where bytes sent cost nothing.
func TestLightenSendsTheFewestBytes(t *testing.T) {
	m, err := testmodels.CNN(tensor.Float64, 4, 1)
	require.NoError(t, err)
	a, err := analyze(m.Graph, m.Cost, m.Learnables)
	require.NoError(t, err)
	boundary := a.fineCuts()[0]
	costs := make([]float64, len(a.seq))
	stageOf := func(cuts []int) map[int]int { // learnable → the stage of its readers
		a.assign(cuts)
		out := map[int]int{}
		for q, n := range a.seq {
			for _, c := range a.children(n) {
				if i, ok := a.learn[c]; ok {
					out[i] = a.stageAt[q]
				}
			}
		}
		return out
	}
	before := stageOf([]int{boundary})
	least, at := a.crossing(boundary), boundary
	for q := boundary - 1; q > 0 && !a.readsLearnable(q); q-- {
		if b := a.crossing(q); b < least {
			least, at = b, q
		}
	}
	require.Less(t, least, a.crossing(boundary), "the test CNN has a lighter place to cut")
	// a moved op's cost that makes the later stage 3 % slower than the
	// earlier stage was: 2 ms an op there, 1 in the later stage.
	n0, n1, k := float64(boundary), float64(len(a.seq)-boundary), float64(boundary-at)
	require.Greater(t, 2*n0, n1, "the earlier stage is the slowest")
	within := (1.03*2*n0 - n1) / k
	for _, c := range []struct {
		name       string
		late       float64 // ms a moved op costs in the later stage
		oneProcess bool
		moves      bool
	}{
		{"the slowest stage no slower", 1, false, true},
		{"the later stage much slower", 1000, false, false},
		{"3 % slower, stages in processes", within, false, true},
		{"3 % slower, stages in one process", within, true, false},
		{"no slower, stages in one process", 1, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			measure := func(p *Plan) ([]StageTime, error) { // the earlier stage's ops cost 2 ms, the later's 1
				times := make([]StageTime, len(p.Stages))
				for q := range a.seq {
					ms := 2.0
					switch {
					case a.stageAt[q] == 1 && q < boundary:
						ms = c.late
					case a.stageAt[q] == 1:
						ms = 1
					}
					times[a.stageAt[q]].Forward += time.Duration(ms * float64(time.Millisecond))
				}
				return times, nil
			}
			a.assign([]int{boundary})
			times, err := measure(&Plan{Stages: make([]*Stage, 2)})
			require.NoError(t, err)
			cfg := config{oneProcess: c.oneProcess}
			cuts, bal, err := lighten(a, &cfg, costs, []int{boundary}, cfg.measured(times), measure)
			require.NoError(t, err)
			if !c.moves {
				require.Equal(t, []int{boundary}, cuts)
				return
			}
			require.Equal(t, []int{at}, cuts, "the cut that sends the fewest bytes")
			require.Less(t, bal.Times[0].Total(), times[0].Total(), "the measured balance is the new cut's")
			require.Equal(t, before, stageOf(cuts), "every learnable stays in its stage")
		})
	}
}
