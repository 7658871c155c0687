package schedule

// Frontier follows action lists run on one device per stage, each action as
// soon as its dependencies allow:
//
//   - F(m) at stage i needs F(m) done at every producer of i and every
//     owner of a learnable i reads, and microbatch m below the limit (a
//     negative limit means no limit);
//   - B(m) or I(m) at stage i needs B(m) or I(m) — the gradient of m's
//     outputs — done at every consumer of i (W(m) follows I(m) on the same
//     stage's list, so it needs nothing more);
//   - U(k) at stage i needs U(k) done at every replica of a learnable i
//     owns;
//   - a flush waits until every stage has reached it.
//
// It is the one readiness rule of the module: Simulate is one Advance of a
// fresh timed Frontier, and a pipeline's driver keeps an untimed one per
// segment to know how far each stage can run with the data supplied. It is
// incremental: each Advance may extend the lists and raise the limit.
//
// The lists are per device: one per stage (Advance), or one per worker
// hosting several stages (AdvanceWorkers), a device running its list in
// order, one action at a time. Readiness is per stage, the clock per
// device.
//
// Every stage must run its forwards, and its backwards, in increasing
// microbatch order (every schedule here does), so "F(m) done at stage j"
// is m below the next forward of j; the numbers need not start at 0 (a
// replay of a resumed run starts where the checkpoint was).
type Frontier struct {
	topo                Topology
	dur                 func(stage int, a Action) float64 // nil: untimed
	pos                 []int                             // per device
	nextF, nextB, nextU []int                             // per stage; nextB counts B and I
	fEnd, bEnd, uEnd    []map[int]float64                 // timed: when F(m), B(m) or I(m), U(k) ended
	free                []float64                         // timed: when each device is free
	arrived             map[int][]float64                 // flush step → arrival time per device (−1: not yet)
	reached             map[int]int                       // flush step → devices arrived
	passed              map[int]int                       // flush step → devices past it
	tl                  Timeline
}

// NewFrontier starts following lists on the stages of topo. dur gives each
// action's duration; nil follows only which actions can run.
func NewFrontier(topo Topology, dur func(stage int, a Action) float64) *Frontier {
	p := len(topo.Producers)
	f := &Frontier{
		topo: topo, dur: dur, nextF: make([]int, p), nextB: make([]int, p), nextU: make([]int, p),
		arrived: map[int][]float64{}, reached: map[int]int{}, passed: map[int]int{},
	}
	if dur != nil {
		f.fEnd, f.bEnd, f.uEnd = make([]map[int]float64, p), make([]map[int]float64, p), make([]map[int]float64, p)
		for i := 0; i < p; i++ {
			f.fEnd[i], f.bEnd[i], f.uEnd[i] = map[int]float64{}, map[int]float64{}, map[int]float64{}
		}
	}
	return f
}

// devices sizes the per-device state for d devices on the first Advance.
func (f *Frontier) devices(d int) {
	if f.pos != nil {
		return
	}
	f.pos, f.free = make([]int, d), make([]float64, d)
	if f.dur != nil {
		f.tl = Timeline{Start: make([][]float64, d), End: make([][]float64, d), Done: f.pos}
	}
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
	return f.advance(len(lists), func(d int) int { return len(lists[d]) },
		func(d, t int) (int, Action) { return d, lists[d][t] }, func(i int) int { return i }, limit)
}

// AdvanceWorkers is Advance over worker lists: device d runs lists[d], the
// actions of the stages it hosts; worker(i) is the device of stage i. Every
// stage's actions must all be on its worker's list.
func (f *Frontier) AdvanceWorkers(lists [][]Slot, worker func(stage int) int, limit int) []int {
	return f.advance(len(lists), func(d int) int { return len(lists[d]) },
		func(d, t int) (int, Action) { return lists[d][t].Stage, lists[d][t].Action }, worker, limit)
}

// advance is Advance over n devices: length(d) actions on device d, action
// t of device d is item(d, t) of its stage, and stage i runs on device
// worker(i).
func (f *Frontier) advance(n int, length func(d int) int, item func(d, t int) (int, Action), worker func(stage int) int, limit int) []int {
	f.devices(n)
	queued := make([]bool, n)
	var queue []int
	wake := func(stages ...int) {
		for _, j := range stages {
			if d := worker(j); !queued[d] {
				queued[d] = true
				queue = append(queue, d)
			}
		}
	}
	for d := 0; d < n; d++ {
		queued[d] = true
		queue = append(queue, d)
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		queued[d] = false
		for f.pos[d] < length(d) {
			i, a := item(d, f.pos[d])
			ready, ok := f.free[d], true
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
			case OpBackward, OpInput:
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
					arr = make([]float64, n)
					for j := range arr {
						arr[j] = -1
					}
					f.arrived[a.Step] = arr
				}
				if arr[d] < 0 {
					arr[d] = f.free[d]
					if f.reached[a.Step]++; f.reached[a.Step] == n {
						for j := 0; j < n; j++ { // the last arrival releases everyone
							if !queued[j] {
								queued[j] = true
								queue = append(queue, j)
							}
						}
					}
				}
				ok = f.reached[a.Step] == n
				for _, t := range arr {
					ready = max(ready, t)
				}
			}
			if !ok {
				break
			}
			f.run(d, i, a, ready)
			switch a.Op { // whom this can unblock
			case OpForward:
				wake(f.topo.Consumers[i]...)
				wake(at(f.topo.Replicas, i)...)
			case OpBackward, OpInput:
				wake(f.topo.Producers[i]...)
			case OpUpdate:
				wake(at(f.topo.Owners, i)...)
			}
		}
	}
	return append([]int(nil), f.pos...)
}

// run records that device d ran a of stage i, from ready.
func (f *Frontier) run(d, i int, a Action, ready float64) {
	end := ready
	if f.dur != nil {
		end += f.dur(i, a)
		f.tl.Start[d] = append(f.tl.Start[d], ready)
		f.tl.End[d] = append(f.tl.End[d], end)
		f.free[d] = end
	}
	switch a.Op {
	case OpForward:
		f.nextF[i] = a.Micro + 1
		if f.dur != nil {
			f.fEnd[i][a.Micro] = end
		}
	case OpBackward, OpInput:
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
	f.pos[d]++
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
