package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/runspec"
)

// scheduleCmd prints the clock × stage grid of a schedule, its
// utilization and delays (experiment.WriteSchedule).
func scheduleCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare schedule", flag.ContinueOnError)
	name := fs.String("schedule", "pipemare", "schedule: sequential, gpipe, 1f1b, pipedream or pipemare")
	p := fs.Int("stages", 4, "stages P")
	n := fs.Int("microbatches", 4, "microbatches per minibatch N")
	steps := fs.Int("minibatches", 2, "minibatches")
	grid := fs.Bool("grid", true, fmt.Sprintf("print the grid, at most %d cells (clocks × stages); off: only the utilization and delays", experiment.MaxGridCells))
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	s, err := runspec.ScheduleNamed(*name)
	if err == nil {
		err = experiment.WriteSchedule(stdout, s, *p, *n, *steps, *grid)
	}
	if err != nil {
		return usageError(fs, "%v", err)
	}
	return nil
}
