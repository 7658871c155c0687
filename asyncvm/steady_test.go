package asyncvm

import (
	"context"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestSteadyState: the window starts when the last stage starts an action
// of the run's schedule (a warm-up's actions do not count) and ends when
// the first stage to run out of work ends its last action; a stage with no
// action of the schedule leaves no window.
func TestSteadyState(t *testing.T) {
	ev := func(sched string, from, to time.Duration) Event {
		return Event{Schedule: sched, Start: from, End: to}
	}
	events := [][]Event{
		{ev("1f1b", 0, 1), ev("1f1b", 1, 2), ev("pipemare", 5, 6), ev("pipemare", 6, 20)},
		{ev("1f1b", 1, 3), ev("pipemare", 7, 8), ev("pipemare", 8, 18)},
	}
	from, to, ok := SteadyState(events, "pipemare")
	require.True(t, ok)
	require.Equal(t, []time.Duration{7, 18}, []time.Duration{from, to})
	from, to, ok = SteadyState(events, "1f1b")
	require.True(t, ok, "a run of the warm-up's schedule starts with it")
	require.Equal(t, []time.Duration{1, 18}, []time.Duration{from, to})
	_, _, ok = SteadyState(append(events, []Event{ev("1f1b", 0, 30)}), "pipemare")
	require.False(t, ok, "the third stage never ran PipeMare")
	_, _, ok = SteadyState([][]Event{{ev("pipemare", 10, 12)}, {ev("pipemare", 0, 9)}}, "pipemare")
	require.False(t, ok, "the second stage ended before the first started")
	_, _, ok = SteadyState(nil, "pipemare")
	require.False(t, ok)
}

// TestReportWindowIsAfterTheWarmup: the report's utilization is measured
// over SteadyState's window, which starts after a synchronous warm-up,
// less the pauses between the calls within it.
func TestReportWindowIsAfterTheWarmup(t *testing.T) {
	const n = 2
	m, err := testmodels.ResNet(tensor.Float64, 2, 1)
	require.NoError(t, err)
	d := makeData(m, n*10, 1)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithWarmup(4, schedule.OneFOneB()), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer vm.Close()
	ctx := context.Background()
	for k := 0; k < 10; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	require.NoError(t, vm.Flush(ctx))
	rep, events := vm.Report(), vm.Events()
	from, to, ok := SteadyState(events, "pipemare")
	require.True(t, ok)
	for _, ev := range events {
		require.Equal(t, "1f1b", ev[0].Schedule)
		require.Less(t, ev[0].Start, from, "the warm-up is before the window")
	}
	for i, sr := range rep.PerStage {
		require.Equal(t, to-from-vm.paused(from, to), sr.Window, "stage %d", i)
		busy := time.Duration(0)
		for _, e := range events[i] {
			if s, f := max(e.Start, from), min(e.End, to); f > s {
				busy += f - s
			}
		}
		require.Equal(t, busy, sr.Busy, "stage %d", i)
	}
}
