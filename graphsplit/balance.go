package graphsplit

// balance cuts blocks (costs of consecutive indivisible pieces) into p
// contiguous groups so that the most expensive group is as cheap as possible,
// and returns the index of the first block of each group after the first.
// It needs 1 ≤ p ≤ len(blocks).
//
// The smallest feasible bound is found by bisection on a greedy packing,
// which is optimal for contiguous min-max partitions; groups are then split
// further (never raising the maximum) until there are exactly p.
func balance(blocks []float64, p int) []int {
	lo, hi := 0.0, 0.0
	for _, b := range blocks {
		hi += b
		if b > lo {
			lo = b
		}
	}
	for i := 0; i < 100 && hi-lo > 1e-9*hi; i++ {
		mid := (lo + hi) / 2
		if len(pack(blocks, mid)) <= p {
			hi = mid
		} else {
			lo = mid
		}
	}
	starts := pack(blocks, hi) // hi is always feasible
	// starts holds the first block of every group, 0 included.
	for len(starts) < p {
		starts = splitLargest(starts, len(blocks))
	}
	return starts[1:]
}

// pack greedily fills groups up to bound and returns each group's first
// block.
func pack(blocks []float64, bound float64) []int {
	starts := []int{0}
	sum := 0.0
	for i, b := range blocks {
		if sum+b > bound && i > starts[len(starts)-1] {
			starts = append(starts, i)
			sum = 0
		}
		sum += b
	}
	return starts
}

// splitLargest splits the group with the most blocks in two.
func splitLargest(starts []int, n int) []int {
	best, size := -1, 1
	for g, s := range starts {
		end := n
		if g+1 < len(starts) {
			end = starts[g+1]
		}
		if end-s > size {
			best, size = g, end-s
		}
	}
	if best < 0 {
		return starts
	}
	cut := starts[best] + size/2
	out := append([]int{}, starts[:best+1]...)
	out = append(out, cut)
	return append(out, starts[best+1:]...)
}
