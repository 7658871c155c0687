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
// its dependencies allow (the rule is Frontier's), and returns the
// timeline. dur gives each action's duration (nil: 1 for F and B, 0
// otherwise). With unit durations this is the clock-cycle view that Grid
// prints; with measured durations it is the virtual-device replay of a real
// run (Replay); with any durations Done tells which prefix of each list can
// run, and a list that cannot finish without a limit is a deadlock.
func Simulate(lists [][]Action, topo Topology, limit int, dur func(stage int, a Action) float64) Timeline {
	if dur == nil {
		dur = unitDuration
	}
	f := NewFrontier(topo, dur)
	f.Advance(lists, limit)
	return f.Timeline()
}

// SimulateWorkers is Simulate for worker lists (one device per worker,
// worker(i) hosting stage i): the timeline is per worker.
func SimulateWorkers(lists [][]Slot, topo Topology, worker func(stage int) int, limit int, dur func(stage int, a Action) float64) Timeline {
	if dur == nil {
		dur = unitDuration
	}
	f := NewFrontier(topo, dur)
	f.AdvanceWorkers(lists, worker, limit)
	return f.Timeline()
}

// unitDuration is one clock for every action on a microbatch (F, B, I, W),
// none for the rest.
func unitDuration(_ int, a Action) float64 {
	if a.PerMicro() {
		return 1
	}
	return 0
}

// InFlight is the largest number of microbatches whose forward stage i has
// run and whose backward (or W, split) it has not, over its action list: the activations
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
		case OpBackward, OpWeight:
			cur--
		}
	}
	return peak
}
