package runout

import (
	"fmt"
	"io"
	"strconv"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
)

// The bounds of WriteSchedule, so that it answers within seconds: the
// actions it simulates (about 80 bytes each: 5 million take half a second
// and 400 MB) and the cells of a printed grid (clocks × stages; 9 bytes
// each).
const (
	MaxScheduleActions = 5_000_000
	MaxGridCells       = 1_000_000
)

// WriteSchedule writes what pipemare schedule shows of s on p stages with
// n microbatches a minibatch over steps minibatches: with grid, a heading
// and the clock × stage grid (schedule.Grid); then the utilization with
// equal action times (schedule.Replay) and, for an asynchronous schedule,
// every stage's delay τ_i. It refuses, before it writes anything, sizes
// that are not positive and runs beyond the bounds, naming the settings
// (stages, microbatches, minibatches, grid: *runspec.Error), and shapes the
// schedule cannot run (schedule.Check). A schedule that places several
// stages on a worker is printed clock × worker.
func WriteSchedule(w io.Writer, s schedule.Schedule, p, n, steps int, grid bool) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"stages", p}, {"microbatches", n}, {"minibatches", steps}} {
		if f.v < 1 {
			return &runspec.Error{Setting: f.name, Value: strconv.Itoa(f.v), Reason: "must be positive"}
		}
	}
	// Every schedule has a forward and a backward (or its two halves) per
	// microbatch and an update and at most one flush per minibatch, at
	// every stage.
	per := 2
	if s.Split {
		per = 3
	}
	if actions := float64(p) * float64(steps) * float64(per*n+2); actions > MaxScheduleActions {
		return &runspec.Error{Setting: "stages", Value: fmt.Sprintf("%d × {minibatches} %d × (%d·{microbatches} %d + 2) = %.0f actions", p, steps, per, n, actions), Reason: fmt.Sprintf("more than the %d this command simulates", MaxScheduleActions)}
	}
	if err := schedule.Check(s, p, n); err != nil {
		var se *schedule.ShapeError
		if errors.As(err, &se) {
			return &runspec.Error{Setting: "schedule", Value: fmt.Sprintf("%s with {stages} %d and {microbatches} %d", s.Name, p, n), Reason: se.Reason}
		}
		return err
	}
	lists := schedule.WorkerLists(s, p, n, steps)
	v := schedule.ReplayWorkers(lists, schedule.Chain(p), s.WorkerOf(p), nil)
	if grid {
		clocks := int(v.Makespan) // unit action times: the makespan counts clocks
		if cells := float64(clocks) * float64(len(lists)); cells > MaxGridCells {
			return &runspec.Error{Setting: "grid", Reason: fmt.Sprintf("%d clocks × %d columns = %.0f cells, more than the %d a printed grid holds; {grid}=false gives the utilization and delays", clocks, len(lists), cells, MaxGridCells)}
		}
		legend := "F forward, B backward, U update"
		if s.Split {
			legend = "F forward, I input gradient, W weight gradient, U update"
		}
		if s.Virtual() > 1 {
			legend += fmt.Sprintf("; %d workers × %d stages, F3@1: stage 1's forward of microbatch 3", len(lists), s.Virtual())
		}
		fmt.Fprintf(w, "%s, P=%d, N=%d, %d minibatches (%s):\n", s.Name, p, n, steps, legend)
		fmt.Fprint(w, schedule.Grid(s, p, n, steps))
	}
	fmt.Fprintf(w, "utilization with equal action times: %.3f", v.Utilization)
	if s.Async {
		fmt.Fprint(w, "; delays τ_i:")
		for i := range p {
			fmt.Fprintf(w, " %d", schedule.Delay(p, n, i))
		}
	}
	fmt.Fprintln(w)
	return nil
}
