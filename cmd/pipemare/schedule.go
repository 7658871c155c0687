package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
)

// scheduleCmd prints the clock × stage grid of a schedule, its
// utilization and delays (experiment.WriteSchedule), or with -table the
// replay table of every schedule (experiment.WriteReplayTable).
func scheduleCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare schedule", flag.ContinueOnError)
	name := fs.String("schedule", "pipemare", "schedule: "+strings.Join(schedule.Names(), ", ")+" (interleaved, zb-v and pipemare-v place 2 stages on each worker: -stages even)")
	p := fs.Int("stages", 4, "stages P")
	n := fs.Int("microbatches", 4, "microbatches per minibatch N")
	steps := fs.Int("minibatches", 2, "minibatches")
	grid := fs.Bool("grid", true, fmt.Sprintf("print the grid, at most %d cells (clocks × stages); off: only the utilization and delays", experiment.MaxGridCells))
	table := fs.Bool("table", false, "print the replay table instead: every schedule's bubble, activations and weight versions beside its formula, over P 2…32 and N 1…32 (docs/schedules.md)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *table {
		return experiment.WriteReplayTable(stdout)
	}
	s, err := train.ScheduleNamed(*name)
	if err == nil {
		err = experiment.WriteSchedule(stdout, s, *p, *n, *steps, *grid)
	}
	if err != nil {
		return usageError(fs, "%v", err)
	}
	return nil
}
