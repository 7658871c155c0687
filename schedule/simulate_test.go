package schedule

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// sweepSimulate is Simulate as it was first written, the oracle of
// TestSimulateMatchesTheSweep: sweep over every stage until nothing moves
// (quadratic in P, as every sweep moves a backward one stage up).
func sweepSimulate(lists [][]Action, topo Topology, limit int, dur func(stage int, a Action) float64) Timeline {
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
	}
	free := make([]float64, p)
	arrived := make(map[int][]float64)
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
				case OpBackward, OpInput:
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
				case OpBackward, OpInput:
					bDone[i][a.Micro] = end
				}
				tl.Done[i]++
				progress = true
			}
		}
	}
	return tl
}

// randomTopology links every stage to its predecessor and to random
// earlier stages (skip connections).
func randomTopology(rng *rand.Rand, p int) Topology {
	t := Chain(p)
	for i := 2; i < p; i++ {
		for j := 0; j < i-1; j++ {
			if rng.Intn(3) == 0 {
				t.Producers[i] = append(t.Producers[i], j)
				t.Consumers[j] = append(t.Consumers[j], i)
			}
		}
	}
	return t
}

// TestSimulateMatchesTheSweep: Simulate (one advance of a Frontier, which
// wakes only the stages a stage's progress can unblock) gives exactly the
// timelines of the sweep it replaced, for every schedule, chains and skip
// connections, unit and random durations, with and without a limit on the
// microbatches (partial runs included).
func TestSimulateMatchesTheSweep(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, s := range All() {
		for p := 1; p <= 7; p++ {
			for _, n := range []int{1, 2, 3, 5} {
				for _, steps := range []int{1, 3} {
					if Check(s, p, n) != nil {
						continue
					}
					lists := s.Actions(p, n, steps)
					for _, topo := range []Topology{Chain(p), randomTopology(rng, p)} {
						for _, limit := range []int{-1, 0, n + 1, n * steps} {
							for _, dur := range []func(int, Action) float64{nil, randomDurations(rng)} {
								name := fmt.Sprintf("%s/P%d/N%d/K%d/limit%d", s.Name, p, n, steps, limit)
								require.Equal(t, nonNil(sweepSimulate(lists, topo, limit, dur)), nonNil(Simulate(lists, topo, limit, dur)), name)
							}
						}
					}
				}
			}
		}
	}
}

// nonNil makes empty timelines comparable, whether their slices are nil.
func nonNil(tl Timeline) Timeline {
	for i := range tl.Done {
		tl.Start[i] = append([]float64{}, tl.Start[i]...)
		tl.End[i] = append([]float64{}, tl.End[i]...)
	}
	return tl
}

// BenchmarkSimulate: the replay of the command line's
// pipemare schedule -stages P -grid=false (N = 4, 2 minibatches); the sweep
// Simulate replaced took 0.9 s at P = 2000 and 102 s at P = 20000.
func BenchmarkSimulate(b *testing.B) {
	for _, p := range []int{2000, 20000} {
		lists := PipeMare().Actions(p, 4, 2)
		b.Run(fmt.Sprintf("P%d", p), func(b *testing.B) {
			for b.Loop() {
				Simulate(lists, Chain(p), -1, nil)
			}
		})
	}
}
