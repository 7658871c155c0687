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
	var b strings.Builder
	header := "clock"
	for i := 0; i < p; i++ {
		header += fmt.Sprintf("  %-7s", fmt.Sprintf("stage%d", i))
	}
	b.WriteString(strings.TrimRight(header, " ") + "\n")
	for c, row := range cells {
		line := fmt.Sprintf("%5d", c)
		for _, cell := range row {
			line += fmt.Sprintf("  %-7s", cell)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}
