package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/schedule"
)

func scheduleCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare schedule", flag.ContinueOnError)
	name := fs.String("schedule", "pipemare", "schedule: sequential, gpipe, 1f1b, pipedream or pipemare")
	p := fs.Int("stages", 4, "stages P")
	n := fs.Int("microbatches", 4, "microbatches per minibatch N")
	steps := fs.Int("minibatches", 2, "minibatches")
	grid := fs.Bool("grid", true, "print the grid (off: only the utilization and delays)")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	s, err := scheduleNamed(*name)
	if err != nil {
		return bad(fs, stderr, "%v", err)
	}
	limit := 100_000 // a printed grid
	if !*grid {
		limit = 5_000_000
	}
	if *p < 1 || *n < 1 || *steps < 1 || *p*(*n)*(*steps) > limit {
		return bad(fs, stderr, "-stages, -microbatches and -minibatches must be positive (and not huge)")
	}
	if *grid {
		fmt.Fprintf(stdout, "%s, P=%d, N=%d, %d minibatches (F forward, B backward, U update):\n", s.Name, *p, *n, *steps)
		fmt.Fprint(stdout, schedule.Grid(s, *p, *n, *steps))
	}
	lists := s.Actions(*p, *n, *steps)
	v := schedule.Replay(lists, schedule.Chain(*p), nil)
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
