package schedule

// EqualPasses is the cost model of Qi et al.'s analysis: a forward, an
// input gradient I and a weight gradient W take one unit each, a whole
// backward two (I and W), anything else nothing.
func EqualPasses(_ int, a Action) float64 {
	switch a.Op {
	case OpForward, OpInput, OpWeight:
		return 1
	case OpBackward:
		return 2
	}
	return 0
}

// Measure is what a schedule costs, on one virtual device per worker.
type Measure struct {
	// Bubble is the fraction of the devices' time they are idle between
	// the first action and the last, with EqualPasses times.
	Bubble float64
	// Activations is the most microbatches' activations a worker holds at
	// once, in units of one microbatch through all the worker's layers (a
	// stage of a worker hosting v counts 1/v): a microbatch's activations
	// at a stage are held from its forward to its backward, or its W.
	Activations float64
	// Weights is the most versions of its weights a stage holds at once:
	// 1, or more with weight stashing (PipeDream).
	Weights float64
}

// Measured replays steps steps of s on p stages with n microbatches a step
// (one device per worker, EqualPasses times) and reads its Measure from
// the replay and the lists.
func Measured(s Schedule, p, n, steps int) Measure {
	lists := WorkerLists(s, p, n, steps)
	v := ReplayWorkers(lists, Chain(p), s.WorkerOf(p), EqualPasses)
	m := Measure{Bubble: 1 - v.Utilization}
	per := 1 / float64(s.Virtual())
	for _, list := range lists {
		held := 0.0
		for _, sl := range list {
			switch sl.Op {
			case OpForward:
				held += per
				m.Activations = max(m.Activations, held)
			case OpBackward, OpWeight:
				held -= per
			}
		}
	}
	for _, list := range s.Actions(p, n, steps) {
		m.Weights = max(m.Weights, float64(weightVersions(list, s.StashWeights)))
	}
	return m
}

// weightVersions is the most weight versions a stage running list holds at
// once: the current one and, stashing, every older one a microbatch in
// flight read at its forward.
func weightVersions(list []Action, stash bool) int {
	if !stash {
		return 1
	}
	version, peak := 0, 1
	read := map[int]int{}  // microbatch in flight → version its forward read
	count := map[int]int{} // version → microbatches in flight that read it
	for _, a := range list {
		switch a.Op {
		case OpForward:
			read[a.Micro] = version
			count[version]++
		case OpBackward, OpWeight:
			v := read[a.Micro]
			if count[v]--; count[v] == 0 {
				delete(count, v)
			}
			delete(read, a.Micro)
		case OpUpdate:
			version++
		}
		held := len(count)
		if _, ok := count[version]; !ok {
			held++
		}
		peak = max(peak, held)
	}
	return peak
}
