package schedule

import (
	"fmt"
	"strings"
)

// Grid prints the schedule's actions on p stages as a clock × stage table
// (clock × worker, each action naming its stage as F3@1, when workers host
// several stages), every action on a microbatch taking one clock, as the
// comments of the schedules show. Updates are printed next to the action
// they follow.
func Grid(s Schedule, p, n, steps int) string {
	lists := WorkerLists(s, p, n, steps)
	tl := SimulateWorkers(lists, Chain(p), s.WorkerOf(p), -1, nil)
	clocks := int(tl.Makespan())
	cells := make([][]string, clocks)
	for c := range cells {
		cells[c] = make([]string, len(lists))
	}
	name := func(sl Slot) string { return sl.Action.String() }
	column := "stage"
	if s.Virtual() > 1 {
		name, column = Slot.String, "worker"
	}
	for j, list := range lists {
		for t := 0; t < tl.Done[j]; t++ {
			sl := list[t]
			switch {
			case sl.PerMicro():
				c := int(tl.Start[j][t])
				cells[c][j] = name(sl)
			case sl.Op == OpUpdate:
				c := int(tl.End[j][t]) - 1
				if c >= 0 {
					cells[c][j] += " " + name(sl)
				}
			}
		}
	}
	var b, line strings.Builder
	row := func(first string, cells []string) {
		line.Reset()
		line.WriteString(first)
		for _, cell := range cells {
			fmt.Fprintf(&line, "  %-7s", cell)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	header := make([]string, len(lists))
	for j := range header {
		header[j] = fmt.Sprintf("%s%d", column, j)
	}
	row("clock", header)
	for c, cs := range cells {
		row(fmt.Sprintf("%5d", c), cs)
	}
	return b.String()
}
