package schedule

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
// durations it is the virtual-device replay of a real run (Replay); with any
// durations Done tells which prefix of each list can run, and a list that
// cannot finish without a limit is a deadlock.
func Simulate(lists [][]Action, topo Topology, limit int, dur func(stage int, a Action) float64) Timeline {
	if dur == nil {
		dur = unitDuration
	}
	p := len(lists)
	tl := Timeline{Start: make([][]float64, p), End: make([][]float64, p), Done: make([]int, p)}
	fDone := make([]map[int]float64, p)
	bDone := make([]map[int]float64, p)
	for i := range lists {
		fDone[i] = make(map[int]float64)
		bDone[i] = make(map[int]float64)
		tl.Start[i] = make([]float64, 0, len(lists[i]))
		tl.End[i] = make([]float64, 0, len(lists[i]))
	}
	free := make([]float64, p)
	arrived := make(map[int][]float64) // flush step → arrival time per stage (−1: not yet)
	for progress := true; progress; {
		progress = false
		for i := range lists {
			for tl.Done[i] < len(lists[i]) {
				a := lists[i][tl.Done[i]]
				ready, ok := free[i], true
				switch a.Op {
				case OpForward:
					if limit >= 0 && a.Micro >= limit {
						ok = false
						break
					}
					for _, pr := range topo.Producers[i] {
						t, done := fDone[pr][a.Micro]
						ok = ok && done
						ready = max(ready, t)
					}
				case OpBackward:
					for _, c := range topo.Consumers[i] {
						t, done := bDone[c][a.Micro]
						ok = ok && done
						ready = max(ready, t)
					}
				case OpFlush:
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
					}
					for _, t := range arr {
						ok = ok && t >= 0
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
				case OpForward:
					fDone[i][a.Micro] = end
				case OpBackward:
					bDone[i][a.Micro] = end
				}
				tl.Done[i]++
				progress = true
			}
		}
	}
	return tl
}

func unitDuration(_ int, a Action) float64 {
	if a.Op == OpForward || a.Op == OpBackward {
		return 1
	}
	return 0
}

// InFlight is the largest number of microbatches whose forward stage i has
// run and whose backward it has not, over its action list: the activations
// it keeps at most, and a bound on the messages waiting on any link it
// produces for (a message for m is sent at F(m) or B(m) of one end and taken
// at F(m) or B(m) of the other, both between F(m) and B(m) at stage i).
func InFlight(list []Action) int {
	cur, peak := 0, 0
	for _, a := range list {
		switch a.Op {
		case OpForward:
			cur++
			peak = max(peak, cur)
		case OpBackward:
			cur--
		}
	}
	return peak
}
