package asyncvm

import (
	"fmt"
	"strings"
)

// Topology says which stages exchange tensors: stage i reads activations from
// Producers[i] and sends them to Consumers[i]; gradients flow back along the
// same links.
type Topology struct {
	Producers, Consumers [][]int
}

// Chain is the topology of p stages in a line.
func Chain(p int) Topology {
	t := Topology{Producers: make([][]int, p), Consumers: make([][]int, p)}
	for i := 1; i < p; i++ {
		t.Producers[i] = []int{i - 1}
		t.Consumers[i-1] = []int{i}
	}
	return t
}

// Timeline is the outcome of a simulated run: when each stage's actions
// started and ended, and how many of them could run.
type Timeline struct {
	// Start[i][t] and End[i][t] time action t of stage i, for t < Done[i].
	Start, End [][]float64
	// Done[i] is how many of stage i's actions ran.
	Done []int
}

// Makespan is the time the last action ended.
func (tl Timeline) Makespan() float64 {
	end := 0.0
	for _, e := range tl.End {
		for _, t := range e {
			end = max(end, t)
		}
	}
	return end
}

// Simulate runs action lists on one device per stage, each action as soon as
// its dependencies allow, and returns the timeline:
//
//   - F(m) at stage i needs F(m) done at every producer of i, and
//     microbatch m < limit (a negative limit means no limit);
//   - B(m) at stage i needs B(m) done at every consumer of i;
//   - a flush waits until every stage has reached it.
//
// dur gives each action's duration (nil: 1 for F and B, 0 otherwise). With
// unit durations this is the clock-cycle view that Grid prints; with measured
// durations it is the virtual-device replay of a real run; with any durations
// Done tells which prefix of each list can run, and a list that cannot finish
// without a limit is a deadlock.
func Simulate(lists [][]Action, topo Topology, limit int, dur func(stage int, a Action) float64) Timeline {
	if dur == nil {
		dur = unitDuration
	}
	p := len(lists)
	tl := Timeline{Start: make([][]float64, p), End: make([][]float64, p), Done: make([]int, p)}
	// fEnd[i][m] is when F(m) ended at stage i (−1: not yet); bEnd the same
	// for B(m).
	fEnd := make([][]float64, p)
	bEnd := make([][]float64, p)
	for i := range lists {
		tl.Start[i] = make([]float64, 0, len(lists[i]))
		tl.End[i] = make([]float64, 0, len(lists[i]))
	}
	ended := func(done [][]float64, i, m int) (float64, bool) {
		if m < len(done[i]) && done[i][m] >= 0 {
			return done[i][m], true
		}
		return 0, false
	}
	record := func(done [][]float64, i, m int, t float64) {
		for len(done[i]) <= m {
			done[i] = append(done[i], -1)
		}
		done[i][m] = t
	}
	free := make([]float64, p)
	arrived := make(map[int][]float64) // flush step → arrival time per stage (−1: not yet)
	reached := make(map[int]int)       // flush step → stages arrived
	// A stage runs as far as it can, then waits until a stage it depends on
	// makes progress: each action is tried once per wake-up of its stage,
	// so the run is linear in the number of actions (a sweep over every
	// stage until nothing moves was quadratic in P). Start times do not
	// depend on the order stages are visited in.
	queued := make([]bool, p)
	var queue []int
	wake := func(j int) {
		if !queued[j] {
			queued[j] = true
			queue = append(queue, j)
		}
	}
	for i := range lists {
		wake(i)
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		queued[i] = false
		for tl.Done[i] < len(lists[i]) {
			a := lists[i][tl.Done[i]]
			ready, ok := free[i], true
			switch a.Op {
			case Forward:
				if limit >= 0 && a.Micro >= limit {
					ok = false
					break
				}
				for _, pr := range topo.Producers[i] {
					t, done := ended(fEnd, pr, a.Micro)
					ok = ok && done
					ready = max(ready, t)
				}
			case Backward:
				for _, c := range topo.Consumers[i] {
					t, done := ended(bEnd, c, a.Micro)
					ok = ok && done
					ready = max(ready, t)
				}
			case Flush:
				arr := arrived[a.Step]
				if arr == nil {
					arr = make([]float64, p)
					for j := range arr {
						arr[j] = -1
					}
					arrived[a.Step] = arr
				}
				if arr[i] < 0 {
					arr[i] = free[i]
					if reached[a.Step]++; reached[a.Step] == p {
						for j := range lists { // the last arrival releases everyone
							wake(j)
						}
					}
				}
				ok = reached[a.Step] == p
				for _, t := range arr {
					ready = max(ready, t)
				}
			}
			if !ok {
				break
			}
			end := ready + dur(i, a)
			tl.Start[i] = append(tl.Start[i], ready)
			tl.End[i] = append(tl.End[i], end)
			free[i] = end
			switch a.Op {
			case Forward:
				record(fEnd, i, a.Micro, end)
				for _, c := range topo.Consumers[i] {
					wake(c)
				}
			case Backward:
				record(bEnd, i, a.Micro, end)
				for _, pr := range topo.Producers[i] {
					wake(pr)
				}
			}
			tl.Done[i]++
		}
	}
	return tl
}

func unitDuration(_ int, a Action) float64 {
	if a.Op == Forward || a.Op == Backward {
		return 1
	}
	return 0
}

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
			case Forward, Backward:
				c := int(tl.Start[i][t])
				cells[c][i] = a.String()
			case Update:
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

// InFlight is the largest number of microbatches whose forward stage i has
// run and whose backward it has not, over its action list: the inputs it
// stashes at most, and a bound on the messages waiting on any link it
// produces for (a message for m is sent at F(m) or B(m) of one end and taken
// at F(m) or B(m) of the other, both between F(m) and B(m) at stage i).
func InFlight(list []Action) int {
	cur, peak := 0, 0
	for _, a := range list {
		switch a.Op {
		case Forward:
			cur++
			peak = max(peak, cur)
		case Backward:
			cur--
		}
	}
	return peak
}
