package asyncvm

import (
	"context"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
)

// TestVirtualDevicesWithEqualTimes: with every forward and backward taking
// the same time, GPipe's replayed utilization is exactly N/(N+P−1) and
// PipeMare's tends to 1 as the run grows.
func TestVirtualDevicesWithEqualTimes(t *testing.T) {
	unit := func(_ int, a schedule.Action) float64 {
		if a.Op == schedule.OpForward || a.Op == schedule.OpBackward {
			return 1
		}
		return 0
	}
	for p := 2; p <= 8; p++ {
		for _, n := range []int{1, 4, 8} {
			g := schedule.Replay(schedule.GPipe().Actions(p, n, 1), schedule.Chain(p), unit)
			require.InDelta(t, float64(n)/float64(n+p-1), g.Utilization, 1e-12, "GPipe P%d N%d", p, n)
			prev := 0.0
			for _, steps := range []int{4, 16, 64} {
				u := schedule.Replay(schedule.PipeMare().Actions(p, n, steps), schedule.Chain(p), unit).Utilization
				require.Greater(t, u, prev, "PipeMare P%d N%d grows with the run", p, n)
				prev = u
			}
			require.Greater(t, prev, 0.9, "PipeMare P%d N%d after 64 minibatches", p, n)
		}
	}
}

// TestReplayPredictsARealRun: a real 2-stage PipeMare run on the benchmark
// CNN (one worker per core here), replayed on 2 virtual devices with the
// measured action times, takes within 15% of the measured wall time.
func TestReplayPredictsARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("times a real run")
	}
	m := benchCNN(16)
	plan, err := graphsplit.Split(m.g, m.cost, m.learn, graphsplit.Stages(2))
	require.NoError(t, err)
	vm, err := New(plan, WithMicrobatches(4), WithSchedule(schedule.PipeMare()))
	require.NoError(t, err)
	defer vm.Close()
	feeds := m.minibatch(4)
	batches := make([]map[*G.Node]G.Value, 12)
	for k := range batches {
		batches[k] = feeds
	}
	_, err = vm.Run(context.Background(), batches)
	require.NoError(t, err)
	rep := vm.Report()
	v := vm.Replay()
	ratio := float64(v.Makespan) / float64(rep.Wall)
	t.Logf("measured %v, replayed %v (%.2f), virtual utilization %.3f, measured %.3f", rep.Wall.Round(time.Millisecond), v.Makespan.Round(time.Millisecond), ratio, v.Utilization, rep.Utilization)
	require.InDelta(t, 1, ratio, 0.15)
}
