package schedule

import "slices"

// Balance splits stages of the given costs, in stage order, into w
// contiguous blocks, one per worker, and returns the worker of each stage:
// the blocks are those whose largest cost is the least any split into w
// non-empty contiguous blocks has (the pipeline's bottleneck), every
// worker hosting at least one stage. Among such splits it takes, block by
// block from the first, the one that leaves the rest the least bottleneck,
// then the longest first block: a pure function of the costs, so every
// process given the same costs computes the same split. 15 stages whose
// first two cost 3 and the others 1, on 2 workers (19 in all):
//
//	cost         3 3 1 1 1 1 1 1 1 1 1 1 1 1 1
//	stage        0 1 2 3 4 5 6 7 8 9 …       14
//	balanced     0 0 0 0 0 0 1 1 1 1 1 1 1 1 1   blocks of cost 10 and 9
//	contiguous   0 0 0 0 0 0 0 0 1 1 1 1 1 1 1   blocks of cost 12 and 7
//
// Stages that all cost the same (zero too) are split by count, the
// larger blocks first. It returns nil when w is not between 1 and the
// number of stages. Costs must be finite and not negative; a block's cost
// is the difference of the costs' running sums, the same arithmetic
// wherever it runs.
func Balance(costs []float64, w int) []int {
	p := len(costs)
	if w < 1 || w > p {
		return nil
	}
	if !slices.ContainsFunc(costs, func(c float64) bool { return c != costs[0] }) {
		costs = slices.Repeat([]float64{1}, p) // exact sums
	}
	sum := make([]float64, p+1) // sum[i]: the costs of stages 0 … i−1
	for i, c := range costs {
		sum[i+1] = sum[i] + c
	}
	block := func(from, to int) float64 { return sum[to] - sum[from] }
	// least[k][s]: the least bottleneck of stages s … p−1 on k workers
	// (p−s ≥ k).
	least := make([][]float64, w+1)
	for k := 1; k <= w; k++ {
		least[k] = make([]float64, p)
		for s := 0; s <= p-k; s++ {
			if k == 1 {
				least[k][s] = block(s, p)
				continue
			}
			least[k][s] = -1
			for e := s + 1; e <= p-k+1; e++ {
				if b := max(block(s, e), least[k-1][e]); least[k][s] < 0 || b < least[k][s] {
					least[k][s] = b
				}
			}
		}
	}
	out := make([]int, p)
	s := 0
	for j := 0; j < w-1; j++ {
		k := w - j
		end := -1
		for e := s + 1; e <= p-k+1; e++ {
			if max(block(s, e), least[k-1][e]) != least[k][s] {
				continue
			}
			if end < 0 || least[k-1][e] <= least[k-1][end] {
				end = e
			}
		}
		for i := s; i < end; i++ {
			out[i] = j
		}
		s = end
	}
	for i := s; i < p; i++ {
		out[i] = w - 1
	}
	return out
}
