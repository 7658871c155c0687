package schedule

import (
	"fmt"
	"sort"
)

// PipeMareVirtual is PipeMare over virtual stages: W = P/v workers host v
// stages each, placed by pl, and every stage runs PipeMare's action list
// (no flush; stage i's forwards read weights Delay(P, N, i) updates old,
// as on one device per stage). A worker runs its stages' actions in the
// order they start on one device per stage with equal action times (ties:
// the lower stage first), so it is never idle in the steady state: a
// worker does v stages' work per clock of the one-device pipeline.
//
//	clock  worker0  worker1        (P=4, v=2, contiguous, N=2:
//	    0  F0@0                     worker 0 hosts stages 0 and 1)
//	    1  F1@0
//	    2  F0@1
//	    3  F2@0     F0@2
//	    4  F1@1
//	    5  F3@0     F1@2
//	    6  F2@1     F0@3
//	    7  F3@1     F2@2
//	    8           F1@3
//	    9           F3@2
//	   10           B0@3
//	   11           B0@2
//	   12  B0@1     F2@3
//	   13  B0@0     B1@3
//	   14           B1@2 U0@3
//	   15  B1@1     F3@3 U0@2
//	   16  B1@0 U0@1 U0@0  B2@3
//	    …                   every worker busy every clock once the
//	                        pipeline is full (more steps)
func PipeMareVirtual(v int, pl Placement) Schedule {
	v = max(v, 1)
	name := fmt.Sprintf("pipemare-v%d", v)
	if pl != Contiguous {
		name += "-" + pl.String()
	}
	if v == 2 && pl == Contiguous {
		name = "pipemare-v"
	}
	s := Schedule{
		Name: name, Async: true, PerWorker: v, Place: pl,
		Actions: func(p, n, steps int) [][]Action {
			if p%v != 0 {
				return nil
			}
			return async(p, n, steps)
		},
	}
	if v == 2 && pl == Contiguous {
		s.Formula = func(p, n, steps int) (Measure, bool) {
			w := p / 2
			return Measure{Bubble: fill(4*(w-1), 3*n*steps), Activations: float64(2*p - 1), Weights: 1}, n*steps >= 2*p
		}
	}
	return checked(s, func(p, n, steps int) [][]Slot { return merged(async(p, n, steps), Chain(p), p/v, pl) })
}

// PlacedBy is s with its stages placed on its workers by pl, for a
// schedule whose workers any placement may take — PipeMare over virtual
// stages, whose stages' lists, and so what it trains, do not depend on
// where they run — and false for any other schedule, and for Balanced,
// which places a run's stages by their costs, not a schedule's.
func (s Schedule) PlacedBy(pl Placement) (Schedule, bool) {
	if !s.Async || s.Virtual() < 2 || pl == Balanced {
		return s, false
	}
	return PipeMareVirtual(s.Virtual(), pl), true
}

// merged gives each of w workers the actions of the stages placement pl
// puts on it, in the order they start in a simulated run of lists on one
// device per stage with equal action times (ties: lower stage first, then
// list order). A worker's list thus follows a run that respects every
// dependency, so the worker lists cannot deadlock.
func merged(lists [][]Action, topo Topology, w int, pl Placement) [][]Slot {
	p := len(lists)
	tl := Simulate(lists, topo, -1, nil)
	type item struct {
		start float64
		stage int
		t     int
	}
	byWorker := make([][]item, w)
	for i, list := range lists {
		j := pl.Worker(i, p, w)
		for t := range list {
			byWorker[j] = append(byWorker[j], item{tl.Start[i][t], i, t})
		}
	}
	out := make([][]Slot, w)
	for j, items := range byWorker {
		sort.Slice(items, func(a, b int) bool {
			x, y := items[a], items[b]
			if x.start != y.start {
				return x.start < y.start
			}
			if x.stage != y.stage {
				return x.stage < y.stage
			}
			return x.t < y.t
		})
		for _, it := range items {
			out[j] = append(out[j], Slot{Stage: it.stage, Action: lists[it.stage][it.t]})
		}
	}
	return out
}
