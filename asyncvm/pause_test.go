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

// stretchPauses makes every pause between vm's calls longer by d, as a
// longer evaluation between the calls would: the actions after a pause,
// and the later pauses, move d later.
func stretchPauses(vm *VM, d time.Duration) {
	for k := range vm.pauses {
		at := vm.pauses[k].to
		for i := range vm.heard {
			for q := range vm.heard[i].events {
				if e := &vm.heard[i].events[q]; e.Start >= at {
					e.Start, e.End = e.Start+d, e.End+d
				}
			}
		}
		vm.pauses[k].to += d
		for j := k + 1; j < len(vm.pauses); j++ {
			vm.pauses[j].from, vm.pauses[j].to = vm.pauses[j].from+d, vm.pauses[j].to+d
		}
	}
}

// TestUtilizationLeavesOutPauses: the time between the caller's calls
// (an evaluation, a checkpoint being written) is not the pipeline's idle
// time: the same actions with every pause between calls a second longer
// give the same utilization, busy time and window, stage by stage, and
// the same training time; only the wall time grows. A run that has only
// warmed up so far is measured over the warm-up's steady state.
func TestUtilizationLeavesOutPauses(t *testing.T) {
	const n, steps, warmup = 2, 8, 3
	m, err := testmodels.ResNet(tensor.Float64, 2, 1)
	require.NoError(t, err)
	d := makeData(m, n*steps, 1)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.FineGrained())
	require.NoError(t, err)
	vm, err := New(plan, WithMicrobatches(n), WithSchedule(schedule.PipeMare()), WithWarmup(warmup, schedule.OneFOneB()), WithSolver(momentum(0.05)))
	require.NoError(t, err)
	defer vm.Close()
	ctx := context.Background()
	for k := 0; k < steps; k++ {
		_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n)) // a call per step: a pause between steps
		require.NoError(t, err)
		if k == warmup-1 {
			warm := vm.Report()
			require.Positive(t, warm.Utilization, "the warm-up's utilization")
			require.LessOrEqual(t, warm.Utilization, 1.0)
		}
	}
	require.NoError(t, vm.Flush(ctx))
	before := vm.Report()
	require.Positive(t, before.Utilization)
	stretchPauses(vm, time.Second)
	after := vm.Report()
	require.Equal(t, before.Wall+time.Duration(len(vm.pauses))*time.Second, after.Wall)
	require.Equal(t, before.Training, after.Training)
	for i := range before.PerStage {
		b, a := before.PerStage[i], after.PerStage[i]
		require.Equal(t, b.Busy, a.Busy, "stage %d", i)
		require.Equal(t, b.Window, a.Window, "stage %d", i)
		require.Equal(t, b.Utilization, a.Utilization, "stage %d", i)
		require.LessOrEqual(t, b.Window, before.Training, "stage %d", i)
		require.Equal(t, b.Idle, a.Idle, "stage %d", i)
	}
	require.Equal(t, before.Utilization, after.Utilization)
	require.Equal(t, before.Bubble, after.Bubble)
}
