package schedule

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlacementsHostEveryStageOnce: each placement gives every stage one
// worker — contiguous blocks, round robin, a V, balanced blocks — and
// contiguous splits stages that the workers do not divide into blocks one
// apart in size, the larger first; balanced splits equal costs so too.
func TestPlacementsHostEveryStageOnce(t *testing.T) {
	for _, c := range []struct {
		pl   Placement
		p, w int
		want [][]int
	}{
		{Contiguous, 4, 2, [][]int{{0, 1}, {2, 3}}},
		{RoundRobin, 4, 2, [][]int{{0, 2}, {1, 3}}},
		{VShape, 4, 2, [][]int{{0, 3}, {1, 2}}},
		{VShape, 8, 2, [][]int{{0, 3, 4, 7}, {1, 2, 5, 6}}},
		{Contiguous, 15, 2, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14}}},
		{Contiguous, 5, 3, [][]int{{0, 1}, {2, 3}, {4}}},
		{Contiguous, 3, 3, [][]int{{0}, {1}, {2}}},
		{Balanced, 15, 2, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14}}},
		{Balanced, 7, 3, [][]int{{0, 1, 2}, {3, 4}, {5, 6}}},
		{Balanced, 7, 5, [][]int{{0, 1}, {2, 3}, {4}, {5}, {6}}},
	} {
		for _, costs := range [][]float64{make([]float64, c.p), slices.Repeat([]float64{0.1}, c.p)} {
			require.Equal(t, c.want, c.pl.Hosts(costs, c.w), "%v, %d stages of equal costs %v on %d workers", c.pl, c.p, costs[0], c.w)
		}
		for i, stages := range c.want {
			for _, s := range stages {
				require.Equal(t, i, c.pl.Worker(s, c.p, c.w), "%v: Worker places stage %d of %d on %d workers as Hosts", c.pl, s, c.p, c.w)
			}
		}
	}
	require.Nil(t, Balanced.Hosts([]float64{1, 2}, 3), "more workers than stages")
	require.Nil(t, Contiguous.Hosts([]float64{1, 2}, 0))
}

// TestBalanceMinimisesTheLargestBlock: Balance splits where the costs
// divide evenly — its largest block is the least of every contiguous split
// into w non-empty blocks, found by trying them all — every worker hosts
// a stage, and ties go to the split leaving the later blocks the least
// bottleneck, then to the longer first block.
func TestBalanceMinimisesTheLargestBlock(t *testing.T) {
	for _, c := range []struct {
		costs []float64
		w     int
		want  []int
	}{
		{[]float64{3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, []int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}}, // the doc's picture
		{[]float64{10, 1, 1, 1}, 2, []int{0, 1, 1, 1}},
		{[]float64{1, 1, 1, 10}, 2, []int{0, 0, 0, 1}},
		{[]float64{10, 1, 1, 1}, 3, []int{0, 1, 1, 2}},                              // the rest as even as it can be: 10 | 2 | 1
		{[]float64{5, 0, 0, 5}, 2, []int{0, 0, 0, 1}},                               // 5 | 5 three ways: the longest first block
		{[]float64{100, 0, 0, 0}, 4, []int{0, 1, 2, 3}},                             // every worker one stage at least
		{[]float64{2, 2, 2, 2, 2, 2}, 4, []int{0, 0, 1, 1, 2, 3}},                   // equal: by count, larger first
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, []int{0, 0, 0, 0, 0, 1, 1, 2, 2}}, // 15 | 13 | 17
		{[]float64{7}, 1, []int{0}},
	} {
		got := Balance(c.costs, c.w)
		require.Equal(t, c.want, got, "%v on %d", c.costs, c.w)
		require.Equal(t, bruteLeast(c.costs, c.w), bottleneck(c.costs, got), "%v on %d: the least largest block", c.costs, c.w)
	}
	require.Nil(t, Balance([]float64{1, 2}, 3))
	require.Nil(t, Balance([]float64{1, 2}, 0))
	require.Nil(t, Balance(nil, 1))
	// Many cost vectors: always the least bottleneck, blocks contiguous,
	// every worker hosting a stage.
	for seed := range 200 {
		p := 1 + seed%9
		costs := make([]float64, p)
		for i := range costs {
			costs[i] = float64((seed*31 + i*17 + i*i*7) % 11)
		}
		for w := 1; w <= p; w++ {
			got := Balance(costs, w)
			require.Len(t, got, p)
			require.Equal(t, 0, got[0])
			require.Equal(t, w-1, got[p-1])
			for i := 1; i < p; i++ {
				require.Contains(t, []int{got[i-1], got[i-1] + 1}, got[i], "%v on %d: contiguous, none empty: %v", costs, w, got)
			}
			require.Equal(t, bruteLeast(costs, w), bottleneck(costs, got), "%v on %d: %v", costs, w, got)
		}
	}
}

// bottleneck is the largest block's cost of the assignment workers.
func bottleneck(costs []float64, workers []int) float64 {
	blocks := make([]float64, workers[len(workers)-1]+1)
	for i, j := range workers {
		blocks[j] += costs[i]
	}
	return slices.Max(blocks)
}

// bruteLeast is the least largest block over every split of costs into w
// non-empty contiguous blocks.
func bruteLeast(costs []float64, w int) float64 {
	if w == 1 {
		var s float64
		for _, c := range costs {
			s += c
		}
		return s
	}
	best := -1.0
	var first float64
	for e := 1; e <= len(costs)-w+1; e++ {
		first += costs[e-1]
		if b := max(first, bruteLeast(costs[e:], w-1)); best < 0 || b < best {
			best = b
		}
	}
	return best
}

// TestPlacedByKeepsTheStagesLists: PipeMare over virtual stages placed
// contiguous, round robin or in a V runs every stage's own list unchanged
// (what it trains does not depend on the placement), each worker hosting
// the stages the placement gives it; no other schedule, and no placement
// by costs, can be placed so.
func TestPlacedByKeepsTheStagesLists(t *testing.T) {
	const p, n, steps = 8, 4, 3
	base := PipeMareVirtual(2, Contiguous)
	for _, pl := range []Placement{Contiguous, RoundRobin, VShape} {
		s, ok := base.PlacedBy(pl)
		require.True(t, ok, "%v", pl)
		require.Equal(t, pl, s.Place)
		require.Equal(t, base.Actions(p, n, steps), s.Actions(p, n, steps), "%v: the stages' lists", pl)
		for w, list := range s.Workers(p, n, steps) {
			for _, sl := range list {
				require.Equal(t, w, pl.Worker(sl.Stage, p, p/2), "%v: worker %d runs %v", pl, w, sl)
			}
		}
	}
	_, ok := base.PlacedBy(Balanced)
	require.False(t, ok, "balanced needs the stages' costs")
	for _, s := range []Schedule{ZBV(), Interleaved(2), PipeMare(), OneFOneB()} {
		_, ok := s.PlacedBy(VShape)
		require.False(t, ok, "%s", s.Name)
	}
}

// TestByNameFindsThePlacedSchedules: the name a placed PipeMare-V records
// (pipemare-v2-v, pipemare-v2-round-robin) names it again, as a run's
// resolved settings and its checkpoints need.
func TestByNameFindsThePlacedSchedules(t *testing.T) {
	for _, pl := range []Placement{Contiguous, RoundRobin, VShape} {
		want, _ := PipeMareVirtual(2, Contiguous).PlacedBy(pl)
		got, ok := ByName(want.Name)
		require.True(t, ok, want.Name)
		require.Equal(t, pl, got.Place, want.Name)
	}
	_, ok := ByName("zb-v2-contiguous")
	require.False(t, ok)
}
