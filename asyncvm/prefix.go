package asyncvm

import "github.com/pipemare/pipemare/schedule"

// prefix finds, incrementally, how far each stage's action list can run
// given the microbatches whose data has been supplied. Every schedule runs
// its forwards and its backwards in increasing microbatch order at each
// stage (the schedule tests check it), so "F(m) done at stage j" is
// m < nextF[j], and no per-microbatch bookkeeping is needed.
type prefix struct {
	topo         schedule.Topology
	pos          []int
	nextF, nextB []int
	reached      map[int]int // flush step → stages that reached it
}

func newPrefix(topo schedule.Topology) *prefix {
	p := len(topo.Producers)
	return &prefix{topo: topo, pos: make([]int, p), nextF: make([]int, p), nextB: make([]int, p), reached: map[int]int{}}
}

// advance moves every stage as far as its list allows with microbatches
// below limit available (negative: all) and returns the positions. lists
// must extend the lists of earlier calls (same prefix).
func (x *prefix) advance(lists [][]schedule.Action, limit int) []int {
	p := len(lists)
	arrivedAt := make([]int, p) // the flush each stage waits at, −1 none
	for progress := true; progress; {
		progress = false
		for i := range lists {
			for x.pos[i] < len(lists[i]) {
				a := lists[i][x.pos[i]]
				ok := true
				switch a.Op {
				case schedule.OpForward:
					ok = limit < 0 || a.Micro < limit
					for _, pr := range x.topo.Producers[i] {
						ok = ok && a.Micro < x.nextF[pr]
					}
				case schedule.OpBackward:
					for _, c := range x.topo.Consumers[i] {
						ok = ok && a.Micro < x.nextB[c]
					}
				case schedule.OpFlush:
					if arrivedAt[i] != a.Step+1 {
						arrivedAt[i] = a.Step + 1
						x.reached[a.Step]++
					}
					ok = x.reached[a.Step] == p
				}
				if !ok {
					break
				}
				switch a.Op {
				case schedule.OpForward:
					x.nextF[i] = a.Micro + 1
				case schedule.OpBackward:
					x.nextB[i] = a.Micro + 1
				case schedule.OpFlush:
					arrivedAt[i] = 0
				}
				x.pos[i]++
				progress = true
			}
		}
	}
	// Stages left waiting at a flush keep their arrival for the next call.
	for _, a := range arrivedAt {
		if a > 0 {
			x.reached[a-1]--
		}
	}
	return append([]int(nil), x.pos...)
}
