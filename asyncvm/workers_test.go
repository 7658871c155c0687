package asyncvm

import (
	"context"
	"sort"
	"testing"

	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
)

// TestWorkersRunTheirStagesInTurn: under interleaved 1F1B and ZB-V in one
// process, the stages a worker hosts never run at the same time, and they
// run their actions in the order of the worker's list, step after step.
func TestWorkersRunTheirStagesInTurn(t *testing.T) {
	const p, n, steps = 4, 4, 3
	for _, s := range []schedule.Schedule{schedule.Interleaved(2), schedule.ZBV()} {
		t.Run(s.Name, func(t *testing.T) {
			vm, m, d := newResNetVM(t, p, n, WithSchedule(s))
			defer vm.Close()
			ctx := context.Background()
			for k := 0; k < steps; k++ {
				_, err := vm.Step(ctx, d.minibatch(t, m.Inputs, k, n))
				require.NoError(t, err)
			}
			require.NoError(t, vm.Flush(ctx))
			events := vm.Events()
			for w, list := range schedule.WorkerLists(s, p, n, steps) {
				var want []schedule.Slot
				for _, sl := range list {
					if sl.Op != schedule.OpFlush {
						want = append(want, sl)
					}
				}
				var got []schedule.Slot
				var ran []Event
				for i := range p {
					if s.WorkerOf(p)(i) != w {
						continue
					}
					for _, e := range events[i] {
						if e.Action.Op != schedule.OpFlush {
							got = append(got, schedule.Slot{Stage: i, Action: e.Action})
							ran = append(ran, e)
						}
					}
				}
				idx := make([]int, len(ran))
				for j := range idx {
					idx[j] = j
				}
				sort.SliceStable(idx, func(a, b int) bool { return ran[idx[a]].Start < ran[idx[b]].Start })
				ordered := make([]schedule.Slot, len(idx))
				for j, k := range idx {
					ordered[j] = got[k]
					if j > 0 {
						require.LessOrEqual(t, ran[idx[j-1]].End, ran[k].Start, "worker %d: %v overlaps %v", w, got[idx[j-1]], got[k])
					}
				}
				require.Equal(t, want, ordered, "worker %d runs its list's order", w)
			}
		})
	}
}
