package schedule

import (
	"fmt"
	"strings"
)

// Grid prints the schedule's actions on p stages as a clock × stage table,
// every forward and backward taking one clock, as the comments of the
// schedules show. Updates are printed next to the backward they follow.
func Grid(s Schedule, p, n, steps int) string {
	lists := s.Actions(p, n, steps)
	tl := Simulate(lists, Chain(p), -1, nil)
	clocks := int(tl.Makespan())
	cells := make([][]string, clocks)
	for c := range cells {
		cells[c] = make([]string, p)
	}
	for i, list := range lists {
		for t := 0; t < tl.Done[i]; t++ {
			a := list[t]
			switch a.Op {
			case OpForward, OpBackward:
				c := int(tl.Start[i][t])
				cells[c][i] = a.String()
			case OpUpdate:
				c := int(tl.End[i][t]) - 1
				if c >= 0 {
					cells[c][i] += " " + a.String()
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
	header := make([]string, p)
	for i := range header {
		header[i] = fmt.Sprintf("stage%d", i)
	}
	row("clock", header)
	for c, cs := range cells {
		row(fmt.Sprintf("%5d", c), cs)
	}
	return b.String()
}
