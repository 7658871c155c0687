package schedule

// Frontier follows action lists run on one device per stage, each action as
// soon as its dependencies allow:
//
//   - F(m) at stage i needs F(m) done at every producer of i, and
//     microbatch m below the limit (a negative limit means no limit);
//   - B(m) at stage i needs B(m) done at every consumer of i;
//   - a flush waits until every stage has reached it.
//
// It is the one readiness rule of the module: Simulate is one Advance of a
// fresh timed Frontier, and a pipeline's driver keeps an untimed one per
// segment to know how far each stage can run with the data supplied. It is
// incremental: each Advance may extend the lists and raise the limit.
//
// Every stage must run its forwards, and its backwards, in increasing
// microbatch order from 0 (every schedule here does), so "F(m) done at
// stage j" is m < done F count of j.
type Frontier struct {
	topo         Topology
	dur          func(stage int, a Action) float64 // nil: untimed
	pos          []int
	nextF, nextB []int
	fEnd, bEnd   [][]float64       // timed: when F(m), B(m) ended, by m
	free         []float64         // timed: when each stage is free
	arrived      map[int][]float64 // flush step → arrival time per stage (−1: not yet)
	passed       map[int]int       // flush step → stages past it
	tl           Timeline
}

// NewFrontier starts following lists on the stages of topo. dur gives each
// action's duration; nil follows only which actions can run.
func NewFrontier(topo Topology, dur func(stage int, a Action) float64) *Frontier {
	p := len(topo.Producers)
	f := &Frontier{
		topo: topo, dur: dur, pos: make([]int, p), nextF: make([]int, p), nextB: make([]int, p),
		free: make([]float64, p), arrived: map[int][]float64{}, passed: map[int]int{},
	}
	if dur != nil {
		f.fEnd, f.bEnd = make([][]float64, p), make([][]float64, p)
		f.tl = Timeline{Start: make([][]float64, p), End: make([][]float64, p), Done: f.pos}
	}
	return f
}

// Advance runs every stage as far as its list allows with microbatches
// below limit available (negative: all) and returns how many actions of
// each list have run (a copy). lists must extend the lists of earlier
// calls.
func (f *Frontier) Advance(lists [][]Action, limit int) []int {
	p := len(lists)
	for progress := true; progress; {
		progress = false
		for i := range lists {
			for f.pos[i] < len(lists[i]) {
				a := lists[i][f.pos[i]]
				ready, ok := f.free[i], true
				switch a.Op {
				case OpForward:
					ok = limit < 0 || a.Micro < limit
					for _, pr := range f.topo.Producers[i] {
						ok = ok && a.Micro < f.nextF[pr]
						if ok && f.dur != nil {
							ready = max(ready, f.fEnd[pr][a.Micro])
						}
					}
				case OpBackward:
					for _, c := range f.topo.Consumers[i] {
						ok = ok && a.Micro < f.nextB[c]
						if ok && f.dur != nil {
							ready = max(ready, f.bEnd[c][a.Micro])
						}
					}
				case OpFlush:
					arr := f.arrived[a.Step]
					if arr == nil {
						arr = make([]float64, p)
						for j := range arr {
							arr[j] = -1
						}
						f.arrived[a.Step] = arr
					}
					if arr[i] < 0 {
						arr[i] = f.free[i]
					}
					for _, t := range arr {
						ok = ok && t >= 0
						ready = max(ready, t)
					}
				}
				if !ok {
					break
				}
				f.run(i, a, ready)
				progress = true
			}
		}
	}
	return append([]int(nil), f.pos...)
}

// run records that stage i ran a, from ready.
func (f *Frontier) run(i int, a Action, ready float64) {
	end := ready
	if f.dur != nil {
		end += f.dur(i, a)
		f.tl.Start[i] = append(f.tl.Start[i], ready)
		f.tl.End[i] = append(f.tl.End[i], end)
		f.free[i] = end
	}
	switch a.Op {
	case OpForward:
		f.nextF[i] = a.Micro + 1
		if f.dur != nil {
			f.fEnd[i] = append(f.fEnd[i], end)
		}
	case OpBackward:
		f.nextB[i] = a.Micro + 1
		if f.dur != nil {
			f.bEnd[i] = append(f.bEnd[i], end)
		}
	case OpFlush:
		if f.passed[a.Step]++; f.passed[a.Step] == len(f.pos) {
			delete(f.arrived, a.Step)
			delete(f.passed, a.Step)
		}
	}
	f.pos[i]++
}

// Timeline is what a timed Frontier ran so far (empty when untimed).
func (f *Frontier) Timeline() Timeline { return f.tl }
