package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

// The schedule command's bounds, so that it answers within seconds: the
// actions it simulates (about 80 bytes each: 5 million take half a second
// and 400 MB) and the cells of a printed grid (clocks × stages; 9 bytes
// each).
const (
	maxActions   = 5_000_000
	maxGridCells = 1_000_000
)

func scheduleCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare schedule", flag.ContinueOnError)
	name := fs.String("schedule", "pipemare", "schedule: sequential, gpipe, 1f1b, pipedream or pipemare")
	p := fs.Int("stages", 4, "stages P")
	n := fs.Int("microbatches", 4, "microbatches per minibatch N")
	steps := fs.Int("minibatches", 2, "minibatches")
	grid := fs.Bool("grid", true, fmt.Sprintf("print the grid, at most %d cells (clocks × stages); off: only the utilization and delays", maxGridCells))
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	s, err := train.ScheduleNamed(*name)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"stages", *p}, {"microbatches", *n}, {"minibatches", *steps}} {
		if f.v < 1 {
			return usageError(fs, "-%s %d: must be positive", f.name, f.v)
		}
	}
	// Every schedule has a forward and a backward per microbatch and an
	// update and at most one flush per minibatch, at every stage.
	if actions := float64(*p) * float64(*steps) * float64(2**n+2); actions > maxActions {
		return usageError(fs, "-stages %d × -minibatches %d × (2·-microbatches %d + 2) = %.0f actions: more than the %d this command simulates", *p, *steps, *n, actions, maxActions)
	}
	lists := s.Actions(*p, *n, *steps)
	v := schedule.Replay(lists, schedule.Chain(*p), nil)
	if *grid {
		clocks := int(v.Makespan) // unit action times: the makespan counts clocks
		if cells := float64(clocks) * float64(*p); cells > maxGridCells {
			return usageError(fs, "-grid: %d clocks × %d stages = %.0f cells, more than the %d a printed grid holds; -grid=false gives the utilization and delays", clocks, *p, cells, maxGridCells)
		}
		fmt.Fprintf(stdout, "%s, P=%d, N=%d, %d minibatches (F forward, B backward, U update):\n", s.Name, *p, *n, *steps)
		fmt.Fprint(stdout, schedule.Grid(s, *p, *n, *steps))
	}
	fmt.Fprintf(stdout, "utilization with equal action times: %.3f", v.Utilization)
	if s.Async {
		for i := 0; i < *p; i++ {
			if i == 0 {
				fmt.Fprint(stdout, "; delays τ_i:")
			}
			fmt.Fprintf(stdout, " %d", schedule.Delay(*p, *n, i))
		}
	}
	fmt.Fprintln(stdout)
	return nil
}
