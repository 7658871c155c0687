package schedule

// Frontier follows action lists run on one device per stage, each action as
// soon as its dependencies allow:
//
//   - F(m) at stage i needs F(m) done at every producer of i and every
//     owner of a learnable i reads, and microbatch m below the limit (a
//     negative limit means no limit);
//   - B(m) at stage i needs B(m) done at every consumer of i;
//   - U(k) at stage i needs U(k) done at every replica of a learnable i
//     owns;
//   - a flush waits until every stage has reached it.
//
// It is the one readiness rule of the module: Simulate is one Advance of a
// fresh timed Frontier, and a pipeline's driver keeps an untimed one per
// segment to know how far each stage can run with the data supplied. It is
// incremental: each Advance may extend the lists and raise the limit.
//
// Every stage must run its forwards, and its backwards, in increasing
// microbatch order (every schedule here does), so "F(m) done at stage j"
// is m below the next forward of j; the numbers need not start at 0 (a
// replay of a resumed run starts where the checkpoint was).
type Frontier struct {
	topo                Topology
	dur                 func(stage int, a Action) float64 // nil: untimed
	pos                 []int
	nextF, nextB, nextU []int
	fEnd, bEnd, uEnd    []map[int]float64 // timed: when F(m), B(m), U(k) ended
	free                []float64         // timed: when each stage is free
	arrived             map[int][]float64 // flush step → arrival time per stage (−1: not yet)
	reached             map[int]int       // flush step → stages arrived
	passed              map[int]int       // flush step → stages past it
	tl                  Timeline
}

// NewFrontier starts following lists on the stages of topo. dur gives each
// action's duration; nil follows only which actions can run.
func NewFrontier(topo Topology, dur func(stage int, a Action) float64) *Frontier {
	p := len(topo.Producers)
	f := &Frontier{
		topo: topo, dur: dur, pos: make([]int, p), nextF: make([]int, p), nextB: make([]int, p), nextU: make([]int, p),
		free: make([]float64, p), arrived: map[int][]float64{}, reached: map[int]int{}, passed: map[int]int{},
	}
	if dur != nil {
		f.fEnd, f.bEnd, f.uEnd = make([]map[int]float64, p), make([]map[int]float64, p), make([]map[int]float64, p)
		for i := 0; i < p; i++ {
			f.fEnd[i], f.bEnd[i], f.uEnd[i] = map[int]float64{}, map[int]float64{}, map[int]float64{}
		}
		f.tl = Timeline{Start: make([][]float64, p), End: make([][]float64, p), Done: f.pos}
	}
	return f
}

// Advance runs every stage as far as its list allows with microbatches
// below limit available (negative: all) and returns how many actions of
// each list have run (a copy). lists must extend the lists of earlier
// calls.
//
// A stage runs as far as it can, then waits until a stage it depends on
// makes progress: each action is tried once per wake-up of its stage, so a
// run is linear in the number of actions (a sweep over every stage until
// nothing moves is quadratic in P). What runs, and when, does not depend
// on the order stages are woken in.
func (f *Frontier) Advance(lists [][]Action, limit int) []int {
	p := len(lists)
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
		for f.pos[i] < len(lists[i]) {
			a := lists[i][f.pos[i]]
			ready, ok := f.free[i], true
			switch a.Op {
			case OpForward:
				ok = limit < 0 || a.Micro < limit
				for _, deps := range [2][]int{f.topo.Producers[i], at(f.topo.Owners, i)} {
					for _, pr := range deps {
						ok = ok && a.Micro < f.nextF[pr]
						if ok && f.dur != nil {
							ready = max(ready, f.fEnd[pr][a.Micro])
						}
					}
				}
			case OpBackward:
				for _, c := range f.topo.Consumers[i] {
					ok = ok && a.Micro < f.nextB[c]
					if ok && f.dur != nil {
						ready = max(ready, f.bEnd[c][a.Micro])
					}
				}
			case OpUpdate:
				for _, r := range at(f.topo.Replicas, i) {
					ok = ok && a.Step < f.nextU[r]
					if ok && f.dur != nil {
						ready = max(ready, f.uEnd[r][a.Step])
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
					if f.reached[a.Step]++; f.reached[a.Step] == p {
						for j := range lists { // the last arrival releases everyone
							wake(j)
						}
					}
				}
				ok = f.reached[a.Step] == p
				for _, t := range arr {
					ready = max(ready, t)
				}
			}
			if !ok {
				break
			}
			f.run(i, a, ready)
			switch a.Op { // whom this can unblock
			case OpForward:
				for _, deps := range [2][]int{f.topo.Consumers[i], at(f.topo.Replicas, i)} {
					for _, c := range deps {
						wake(c)
					}
				}
			case OpBackward:
				for _, pr := range f.topo.Producers[i] {
					wake(pr)
				}
			case OpUpdate:
				for _, o := range at(f.topo.Owners, i) {
					wake(o)
				}
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
			f.fEnd[i][a.Micro] = end
		}
	case OpBackward:
		f.nextB[i] = a.Micro + 1
		if f.dur != nil {
			f.bEnd[i][a.Micro] = end
		}
	case OpUpdate:
		f.nextU[i] = a.Step + 1
		if f.dur != nil {
			f.uEnd[i][a.Step] = end
		}
	case OpFlush:
		if f.passed[a.Step]++; f.passed[a.Step] == len(f.pos) {
			delete(f.arrived, a.Step)
			delete(f.reached, a.Step)
			delete(f.passed, a.Step)
		}
	}
	f.pos[i]++
}

// at is lists[i], or nil when lists is nil.
func at(lists [][]int, i int) []int {
	if lists == nil {
		return nil
	}
	return lists[i]
}

// Timeline is what a timed Frontier ran so far (empty when untimed).
func (f *Frontier) Timeline() Timeline { return f.tl }
