package runout

import (
	"strconv"
	"testing"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/stretchr/testify/require"
)

// TestGanttWindowIsTheSteadyState: the Gantt shows three minibatches where
// the stages are busiest, not the synchronous warm-up, a pause (evaluation
// between epochs) nor the final drain.
func TestGanttWindowIsTheSteadyState(t *testing.T) {
	const s = time.Second
	var events [][]asyncvm.Event
	for stage := 0; stage < 2; stage++ {
		var evs []asyncvm.Event
		add := func(a schedule.Action, from, to time.Duration) {
			sched := "pipemare"
			if from < 4*s { // the warm-up, as busy as the rest
				sched = "1f1b"
			}
			evs = append(evs, asyncvm.Event{Stage: stage, Action: a, Schedule: sched, Start: from, End: to})
		}
		m := 0
		for sec := 0; sec < 20; sec++ { // one minibatch of two microbatches a second
			at := time.Duration(sec) * s
			switch {
			case sec >= 8 && sec < 11: // a pause: evaluation
				continue
			case sec >= 17: // the drain: stage 1 idles
				if stage == 1 {
					continue
				}
			}
			add(schedule.Forward(m), at, at+s/4)
			add(schedule.Backward(m), at+s/4, at+s/2)
			add(schedule.Forward(m+1), at+s/2, at+3*s/4)
			add(schedule.Backward(m+1), at+3*s/4, at+s)
			add(schedule.Update(sec), at+s, at+s)
			m += 2
		}
		events = append(events, evs)
	}
	from, to := steadyWindow(&train.Result{Events: events, Report: asyncvm.Report{Schedule: "pipemare"}})
	require.Equal(t, 3*s, to-from, "three minibatches")
	require.True(t, (from >= 4*s && to <= 8*s) || (from >= 11*s && to <= 17*s), "window %v–%v overlaps the warm-up, the pause or the drain", from, to)
}

// TestSecondTicksAreDistinct: a window of a third of a second gets labels
// that are its ticks' values, with the decimals they need.
func TestSecondTicksAreDistinct(t *testing.T) {
	for _, w := range [][2]float64{{24.32, 24.59}, {19.71, 20.09}, {1.62, 1.99}, {0, 50}} {
		seen := map[string]bool{}
		for _, tick := range (secondTicks{}).Ticks(w[0], w[1]) {
			if tick.Label != "" {
				require.False(t, seen[tick.Label], "%v: %q twice", w, tick.Label)
				seen[tick.Label] = true
				v, err := strconv.ParseFloat(tick.Label, 64)
				require.NoError(t, err)
				require.InDelta(t, tick.Value, v, 1e-9, "%v: the label is the tick's value", w)
			}
		}
		require.GreaterOrEqual(t, len(seen), 2, "%v", w)
	}
}
