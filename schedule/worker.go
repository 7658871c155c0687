package schedule

import "fmt"

// Slot is one action of one stage in a worker's list: a worker (goroutine
// set, stage process or host) that hosts several stages runs their actions
// in one order, one at a time.
type Slot struct {
	Stage int
	Action
}

// String prints the action and its stage, F3@1.
func (s Slot) String() string { return fmt.Sprintf("%v@%d", s.Action, s.Stage) }

// Placement says which worker hosts each of P stages when W workers host
// v = P/W stages each (contiguously or balanced, W need not divide P).
type Placement uint8

const (
	// Contiguous: worker j hosts stages j·v … j·v+v−1; when W does not
	// divide P, consecutive blocks whose sizes differ by one at most, the
	// larger first (15 stages on 2 workers: 0…7 and 8…14).
	Contiguous Placement = iota
	// RoundRobin: worker j hosts stages j, j+W, j+2W, … (interleaved
	// 1F1B's placement).
	RoundRobin
	// VShape: worker j hosts stage j and stage 2W−1−j, and so on down and
	// up the stages (ZB-V's placement: a worker's two stages are the first
	// and last ones a microbatch meets on it).
	VShape
	// Balanced: contiguous blocks split where the stages' costs divide
	// evenly (Balance), not by count: the only placement that reads the
	// costs (Assign). Placed by position alone (Worker), every stage costs
	// the same.
	Balanced
)

// Placements lists every placement.
func Placements() []Placement { return []Placement{Contiguous, RoundRobin, VShape, Balanced} }

func (pl Placement) String() string {
	switch pl {
	case Contiguous:
		return "contiguous"
	case RoundRobin:
		return "round-robin"
	case VShape:
		return "v"
	case Balanced:
		return "balanced"
	}
	return fmt.Sprintf("Placement(%d)", uint8(pl))
}

// PlacementNamed returns the placement String prints as name.
func PlacementNamed(name string) (Placement, bool) {
	for _, pl := range Placements() {
		if pl.String() == name {
			return pl, true
		}
	}
	return 0, false
}

// Worker is the worker hosting stage i of p on w workers (w divides p,
// or the placement is Contiguous or Balanced, which Worker places as if
// every stage cost the same: Assign places by the costs).
func (pl Placement) Worker(i, p, w int) int {
	switch pl {
	case RoundRobin:
		return i % w
	case VShape:
		if c, o := i/w, i%w; c%2 == 1 {
			return w - 1 - o
		} else {
			return o
		}
	case Balanced:
		return pl.Assign(make([]float64, p), w)[i]
	}
	return i * w / p // i / v when w divides p
}

// Assign is the worker of each stage of the given costs on w workers,
// nil unless 1 ≤ w ≤ the stages (and w must divide them for RoundRobin
// and VShape): Balance's for Balanced, Worker's for the others, which
// ignore the costs.
func (pl Placement) Assign(costs []float64, w int) []int {
	p := len(costs)
	switch {
	case w < 1 || w > p:
		return nil
	case pl == Balanced:
		return Balance(costs, w)
	}
	out := make([]int, p)
	for i := range out {
		out[i] = pl.Worker(i, p, w)
	}
	return out
}

// Hosts lists the stages each of w workers hosts, in stage order, for
// stages of the given costs (Assign); nil where Assign is.
func (pl Placement) Hosts(costs []float64, w int) [][]int {
	workers := pl.Assign(costs, w)
	if workers == nil {
		return nil
	}
	out := make([][]int, w)
	for i, j := range workers {
		out[j] = append(out[j], i)
	}
	return out
}

// WorkerLists returns the worker lists of s on p stages: s.Workers's when
// s hosts several stages per worker, else each stage's list as its own
// worker's.
func WorkerLists(s Schedule, p, n, steps int) [][]Slot {
	if s.Workers != nil {
		return s.Workers(p, n, steps)
	}
	lists := s.Actions(p, n, steps)
	out := make([][]Slot, len(lists))
	for i, list := range lists {
		out[i] = make([]Slot, len(list))
		for t, a := range list {
			out[i][t] = Slot{Stage: i, Action: a}
		}
	}
	return out
}

// ByStage returns each of p stages' own list from worker lists: its
// actions in the order its worker runs them, and every flush of its
// worker.
func ByStage(lists [][]Slot, p int, worker func(stage int) int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		out[i] = []Action{}
	}
	for d, list := range lists {
		for _, s := range list {
			if s.Op == OpFlush {
				for i := range out {
					if worker(i) == d {
						out[i] = append(out[i], s.Action)
					}
				}
				continue
			}
			out[s.Stage] = append(out[s.Stage], s.Action)
		}
	}
	return out
}

// WorkerOf is the worker function of s on p stages: which worker hosts each
// stage.
func (s Schedule) WorkerOf(p int) func(stage int) int {
	v := s.Virtual()
	return func(i int) int { return s.Place.Worker(i, p, p/v) }
}

// checked completes s: its Workers and Actions give nil lists where
// Check refuses the shape, and Actions is the stages' share of Workers.
func checked(s Schedule, workers func(p, n, steps int) [][]Slot) Schedule {
	s.Workers = func(p, n, steps int) [][]Slot {
		if Check(s, p, n) != nil {
			return nil
		}
		return workers(p, n, steps)
	}
	if s.Actions == nil {
		s.Actions = func(p, n, steps int) [][]Action {
			if Check(s, p, n) != nil {
				return nil
			}
			return ByStage(workers(p, n, steps), p, s.WorkerOf(p))
		}
	}
	return s
}

// Virtual is v, the stages each of s's workers hosts.
func (s Schedule) Virtual() int { return max(s.PerWorker, 1) }
