package experiment

import (
	"fmt"
	"io"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"strconv"
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
// that are not positive and runs beyond the bounds, naming the command's
// flags (-stages, -microbatches, -minibatches, -grid).
func WriteSchedule(w io.Writer, s schedule.Schedule, p, n, steps int, grid bool) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"stages", p}, {"microbatches", n}, {"minibatches", steps}} {
		if f.v < 1 {
			return &runspec.Error{Setting: f.name, Value: strconv.Itoa(f.v), Reason: "must be positive"}
		}
	}
	// Every schedule has a forward and a backward per microbatch and an
	// update and at most one flush per minibatch, at every stage.
	if actions := float64(p) * float64(steps) * float64(2*n+2); actions > MaxScheduleActions {
		return &runspec.Error{Setting: "stages", Value: fmt.Sprintf("%d × {minibatches} %d × (2·{microbatches} %d + 2) = %.0f actions", p, steps, n, actions), Reason: fmt.Sprintf("more than the %d this command simulates", MaxScheduleActions)}
	}
	v := schedule.Replay(s.Actions(p, n, steps), schedule.Chain(p), nil)
	if grid {
		clocks := int(v.Makespan) // unit action times: the makespan counts clocks
		if cells := float64(clocks) * float64(p); cells > MaxGridCells {
			return &runspec.Error{Setting: "grid", Reason: fmt.Sprintf("%d clocks × %d stages = %.0f cells, more than the %d a printed grid holds; {grid}=false gives the utilization and delays", clocks, p, cells, MaxGridCells)}
		}
		fmt.Fprintf(w, "%s, P=%d, N=%d, %d minibatches (F forward, B backward, U update):\n", s.Name, p, n, steps)
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
