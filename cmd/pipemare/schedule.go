package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// scheduleCmd prints the clock × stage grid of a schedule, its
// utilization and delays (runout.WriteSchedule), or with -table the
// replay table of every schedule (runout.WriteReplayTable).
func scheduleCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare schedule", flag.ContinueOnError)
	name := fs.String("schedule", "pipemare", "schedule: "+strings.Join(schedule.Names(), ", ")+" (interleaved, zb-v and pipemare-v place 2 stages on each worker: -stages even)")
	p := fs.Int("stages", 4, "stages P")
	n := fs.Int("microbatches", 4, "microbatches per minibatch N")
	steps := fs.Int("minibatches", 2, "minibatches")
	grid := fs.Bool("grid", true, fmt.Sprintf("print the grid, at most %d cells (clocks × stages); off: only the utilization and delays", runout.MaxGridCells))
	placement := fs.String("placement", "", "with -schedule pipemare-v: how its stages map to its workers, contiguous, round-robin or v (interleaved is round-robin, zb-v v; balanced places a run's stages on processes by their costs: pipemare train -placement)")
	table := fs.Bool("table", false, "print the replay table instead: every schedule's bubble, activations and weight versions beside its formula, over P 2…32 and N 1…32 (docs/schedules.md)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *table {
		return runout.WriteReplayTable(stdout)
	}
	s, err := runspec.ScheduleNamed(*name)
	if err == nil && *placement != "" {
		s, err = placed(s, *placement)
	}
	if err == nil {
		err = runout.WriteSchedule(stdout, s, *p, *n, *steps, *grid)
	}
	if err != nil {
		return usageError(fs, "%v", err)
	}
	return nil
}

// placed is pipemare-v with the named placement (Schedule.PlacedBy).
func placed(s schedule.Schedule, name string) (schedule.Schedule, error) {
	pl, ok := schedule.PlacementNamed(name)
	if !ok {
		var names []string
		for _, p := range schedule.Placements() {
			if p != schedule.Balanced { // a schedule alone has no costs
				names = append(names, p.String())
			}
		}
		return s, errors.Errorf("-placement %q: one of %s", name, strings.Join(names, ", "))
	}
	if pl == schedule.Balanced {
		return s, errors.Errorf("-placement balanced: places a run's stages on its processes by their costs, which a schedule does not know; give contiguous, round-robin or v")
	}
	out, ok := s.PlacedBy(pl)
	if !ok {
		return s, errors.Errorf("-placement %s: only pipemare-v's placement can be chosen; %s's is %v", name, s.Name, s.Place)
	}
	return out, nil
}
